//! The host's free memory, from `/proc/meminfo`.

/// The host's available memory in bytes from `/proc/meminfo`: `MemAvailable`,
/// or `MemFree` on kernels older than 3.14 that lack it.
pub(super) fn parse_meminfo_available(contents: &str) -> Option<u64> {
    meminfo_field(contents, "MemAvailable").or_else(|| meminfo_field(contents, "MemFree"))
}

/// One `Key:   123 kB` line of `/proc/meminfo`, in bytes.
fn meminfo_field(contents: &str, key: &str) -> Option<u64> {
    contents.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != key {
            return None;
        }
        let mut fields = rest.split_whitespace();
        let n: u64 = fields.next()?.parse().ok()?;
        match fields.next() {
            Some("kB") | None => n.checked_mul(1024),
            Some(_) => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meminfo_reads_mem_available_in_bytes() {
        let meminfo = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\nMemAvailable:   24441116 kB\nBuffers:          100 kB\n";
        assert_eq!(parse_meminfo_available(meminfo), Some(24_441_116 * 1024));
    }

    #[test]
    fn meminfo_without_mem_available_falls_back_to_mem_free() {
        let meminfo = "MemTotal:       32768000 kB\nMemFree:         1000000 kB\n";
        assert_eq!(parse_meminfo_available(meminfo), Some(1_000_000 * 1024));
    }

    #[test]
    fn meminfo_of_garbage_or_empty_is_unknown() {
        assert_eq!(parse_meminfo_available(""), None);
        assert_eq!(parse_meminfo_available("MemAvailable: lots kB\n"), None);
        assert_eq!(parse_meminfo_available("MemAvailable: 12 MB\n"), None);
        assert_eq!(parse_meminfo_available("MemAvailableX: 12 kB\n"), None);
        assert_eq!(parse_meminfo_available("no colons here"), None);
        let huge = format!("MemAvailable: {} kB\n", u64::MAX);
        assert_eq!(parse_meminfo_available(&huge), None);
    }
}
