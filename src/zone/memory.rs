//! Backing a large zone with transparent huge pages.
//!
//! A lookup touches two places: the table's slot and the entry. In a zone of 100,000 names
//! those are scattered over tens of megabytes, so with 4 KiB pages nearly
//! every lookup also misses the TLB, and in a virtual machine a TLB miss walks two sets of page
//! tables. After a full load the builder asks the kernel to move the 2 MiB regions that hold the
//! zone onto huge pages (`MADV_COLLAPSE`, Linux 6.1+, which works whatever the system-wide THP
//! mode is short of "never"). It is a hint: any failure leaves the memory as it was.
//!
//! Only regions that are mostly resident already (three quarters of their pages) are collapsed,
//! so the process grows by at most the quarter of each region it did not use.

use std::collections::BTreeMap;

/// Fewer names than this fit the TLB's reach anyway.
pub const MIN_NAMES: usize = 4096;

/// What [`prefer_huge_pages`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Backing {
    /// Huge-page-sized regions holding zone data.
    pub regions: usize,
    /// Of those, the ones now on a huge page.
    pub collapsed: usize,
}

/// The huge-page-aligned regions that hold enough of `ranges` (start address, length) to be worth
/// a huge page: at least a sixteenth of the region.
pub fn regions(ranges: impl IntoIterator<Item = (usize, usize)>, huge: usize) -> Vec<usize> {
    let mut bytes: BTreeMap<usize, usize> = BTreeMap::new();
    for (start, len) in ranges {
        let end = start.saturating_add(len);
        let mut at = start;
        while at < end {
            let region = at & !(huge - 1);
            let upto = end.min(region.saturating_add(huge));
            *bytes.entry(region).or_default() += upto - at;
            at = upto;
        }
    }
    bytes
        .into_iter()
        .filter(|&(_, b)| b >= huge / 16)
        .map(|(r, _)| r)
        .collect()
}

/// Collapses the regions holding `ranges` onto huge pages where the kernel can.
#[cfg(target_os = "linux")]
pub fn prefer_huge_pages(ranges: impl IntoIterator<Item = (usize, usize)>) -> Backing {
    let Some(huge) = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size")
        .ok()
        .and_then(|s| s.trim().parse::<usize>().ok())
        .filter(|h| h.is_power_of_two())
    else {
        return Backing::default();
    };
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if page <= 0 || huge <= page as usize {
        return Backing::default();
    }
    let pages = huge / page as usize;
    let mut resident = vec![0u8; pages];
    let mut out = Backing::default();
    for region in regions(ranges, huge) {
        out.regions += 1;
        // SAFETY: mincore only reads page tables and writes one byte per page into `resident`,
        // which has one byte for each page of the region; an unmapped part makes it fail.
        let r = unsafe { libc::mincore(region as *mut libc::c_void, huge, resident.as_mut_ptr()) };
        if r != 0 || resident.iter().filter(|&&b| b & 1 != 0).count() * 4 < pages * 3 {
            continue;
        }
        // SAFETY: MADV_COLLAPSE moves the region's contents onto a huge page without changing
        // them; the region is mapped (mincore just succeeded on it), and a failure changes
        // nothing.
        if unsafe { libc::madvise(region as *mut libc::c_void, huge, libc::MADV_COLLAPSE) } == 0 {
            out.collapsed += 1;
        }
    }
    out
}

#[cfg(not(target_os = "linux"))]
pub fn prefer_huge_pages(_: impl IntoIterator<Item = (usize, usize)>) -> Backing {
    Backing::default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUGE: usize = 2 << 20;

    #[test]
    fn regions_are_those_holding_a_sixteenth_of_their_size() {
        let base = 64 * HUGE;
        let ranges = [
            // Many small entries in the first region: 200 KiB in all, enough.
            (base..base + 200 * 1024)
                .step_by(1024)
                .map(|a| (a, 1024))
                .collect::<Vec<_>>(),
            // One table straddling the second and third regions: 100 KiB in the second (too
            // little), 1 MiB in the third.
            vec![(base + 2 * HUGE - 100 * 1024, 100 * 1024 + (1 << 20))],
            // A lone entry in the fifth.
            vec![(base + 4 * HUGE + 4096, 128)],
        ]
        .concat();
        assert_eq!(regions(ranges, HUGE), vec![base, base + 2 * HUGE]);

        let dense: Vec<(usize, usize)> = (0..3000).map(|k| (base + k * 100, 100)).collect();
        assert_eq!(regions(dense, HUGE), vec![base]);
        assert_eq!(
            regions([(base, 3 * HUGE)], HUGE),
            vec![base, base + HUGE, base + 2 * HUGE]
        );
        assert!(regions([], HUGE).is_empty());
    }

    /// On a Linux machine with huge pages, a large dense allocation ends up on them; elsewhere
    /// the call is a no-op that reports what it found.
    #[test]
    fn a_dense_region_is_collapsed_where_the_kernel_allows() {
        let data: Vec<u8> = vec![1; 8 * HUGE];
        let b = prefer_huge_pages([(data.as_ptr() as usize, data.len())]);
        assert!(b.collapsed <= b.regions);
        assert!(data.iter().all(|&x| x == 1), "contents unchanged");
        #[cfg(target_os = "linux")]
        if std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|s| !s.contains("[never]"))
        {
            assert!(b.regions >= 7, "{b:?}");
        }
    }
}
