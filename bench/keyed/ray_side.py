"""Ray Serve's side of bench/keyed.sh: one deployment of `workers` replicas,
with Ray's default `max_ongoing_requests` (a replica may run several
requests at once, where a kennel worker runs one job at a time) unless
--ray-max-ongoing says otherwise, with a `@serve.multiplexed(max_num_models_per_replica=K)` loader
around model.load; jobs go through a DeploymentHandle with
`.options(multiplexed_model_id=key)`."""

import asyncio
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def start():
    """Starts a local Ray (no dashboard, no usage report) sized so that CPU
    requests never hold a replica back: the machine's cores are shared by
    both sides anyway."""
    import logging

    import ray

    logging.getLogger("ray.serve").setLevel(logging.WARNING)
    ray.init(
        num_cpus=64,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        object_store_memory=128 * 1024 * 1024,
    )
    return ray.__version__


def stop():
    import ray
    from ray import serve

    serve.shutdown()
    ray.shutdown()


def deploy(workers, keys_per_worker, loads_path, max_ongoing):
    """Runs the application; returns its handle once every replica answers,
    and the replicas' max_ongoing_requests."""
    from ray import serve

    options = {"num_replicas": workers, "ray_actor_options": {"num_cpus": 0.01}}
    if max_ongoing is not None:
        options["max_ongoing_requests"] = max_ongoing

    @serve.deployment(**options)
    class Models:
        def __init__(self, loads):
            os.environ["BENCH_KEYED_LOADS"] = loads
            sys.path.insert(0, HERE)
            import model

            self.model = model

        @serve.multiplexed(max_num_models_per_replica=keys_per_worker)
        async def get_model(self, key):
            return await asyncio.to_thread(self.model.load, key)

        async def __call__(self, request):
            m = await self.get_model(serve.get_multiplexed_model_id())
            return await asyncio.to_thread(self.model.run, m, request)

        def ping(self):
            return os.getpid()

    handle = serve.run(Models.bind(loads_path), name="keyed", route_prefix=None)
    # The handle's router learns the replicas on its first calls.
    pids = set()
    for _ in range(20 * workers):
        pids.add(handle.ping.remote().result(timeout_s=60))
        if len(pids) == workers:
            break
    return handle, Models.max_ongoing_requests


def undeploy():
    from ray import serve

    serve.delete("keyed")


def caller(handle):
    """A function that runs one job of `key` and returns its reply."""

    def call(key, request):
        return handle.options(multiplexed_model_id=key).remote(request).result(timeout_s=600)

    return call
