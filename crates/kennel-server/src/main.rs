//! The `kennel` binary: `kennel serve|run|check|status|completions` (see
//! [`kennel_server::main`]).

fn main() -> std::process::ExitCode {
    kennel_server::main()
}
