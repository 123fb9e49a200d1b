# Sourced by the benchmark scripts (from the repository's root): messages on
# stderr, a failure that names its script, and wrk installed when missing.

say() { printf '%s\n' "$*" >&2; }
die() { say "$(basename "$0"): FAILED: $*"; exit 1; }

need_wrk() {
    command -v wrk >/dev/null 2>&1 && return
    say "== installing wrk"
    apt-get install -y wrk >/dev/null 2>&1 || { apt-get update >/dev/null 2>&1 && apt-get install -y wrk >/dev/null 2>&1; } \
        || die "wrk is missing and could not be installed"
}
