//! Process CPU time (ours from getrusage, the server's from /proc) and the file limit.

use std::fs;

fn timeval_us(tv: libc::timeval) -> u64 {
    (tv.tv_sec as u64) * 1_000_000 + tv.tv_usec as u64
}

/// User + system CPU time of this process so far, in µs.
pub fn self_cpu_us() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
    let ru = unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
            return 0;
        }
        ru
    };
    timeval_us(ru.ru_utime) + timeval_us(ru.ru_stime)
}

/// User + system CPU time of process `pid` (all its threads, live and exited), in µs, from
/// fields 14 and 15 of /proc/PID/stat. Resolution is one clock tick (usually 10 ms).
pub fn proc_cpu_us(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may contain spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // `rest` starts at field 3 (state); utime is field 14, stime field 15.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as u64 } else { 100 };
    Some((utime + stime) * 1_000_000 / hz)
}

/// Raise the soft limit on open files to the hard limit (for thousands of connections).
pub fn raise_nofile() -> u64 {
    // SAFETY: get/setrlimit read and write the struct we own.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            let _ = libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
        lim.rlim_cur as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_own_cpu() {
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(proc_cpu_us(std::process::id()).is_some());
        assert!(self_cpu_us() > 0);
        assert!(proc_cpu_us(u32::MAX).is_none());
    }
}
