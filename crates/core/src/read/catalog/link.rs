//! The rules a version and its parent must keep between them to be links of one chain.

use super::{Result, Summary};
use crate::error::ReadError;
use ickpt_format::{FormatError, RegionEntry};
use std::collections::HashMap;

/// The rules between a version and its parent. With the parent's own rules and, in turn,
/// its parent's, they make every page of every region of `child` stored in the chain, in
/// the same layout, by versions written one after the other into this store:
/// - the parent is the file the child was written after (format 3: its `meta_crc`), so a
///   stale or foreign file given the parent's number is refused;
/// - depths follow, page sizes agree, no older format follows a newer one (it could not be
///   bound to its parent);
/// - each region the parent already held (born at or before it) is there with the same
///   incarnation and shape; each region born after the parent is born in the child, which
///   the child's own rules make it store whole.
pub fn check_link(
    child: &Summary,
    parent: &Summary,
    describe: &dyn Fn(u64) -> String,
) -> Result<()> {
    let (c, p) = (&child.header, &parent.header);
    let bad = |offset: u64, what: String| ReadError::Corrupt {
        file: describe(c.version),
        source: FormatError::Corrupt { offset, what },
    };
    debug_assert_eq!(c.parent, p.version);
    if c.chain_depth != p.chain_depth + 1 {
        return Err(bad(
            32,
            format!("chain depth does not follow its parent {}", p.version),
        ));
    }
    if c.page_size != p.page_size {
        return Err(bad(
            12,
            format!(
                "page size {} differs from its parent {}'s ({})",
                c.page_size, p.version, p.page_size
            ),
        ));
    }
    // Binding began with format 3; a format-3 increment of a format-4 parent (a store taken
    // back to an older ickpt) is bound as well.
    if c.format_version < 3 && p.format_version >= 3 {
        return Err(bad(
            8,
            format!(
                "format {} version after its parent {} in format {}: an older writer cannot \
                 be bound to its parent, so this file is not taken as part of the chain",
                c.format_version, p.version, p.format_version
            ),
        ));
    }
    if c.format_version >= 3 && c.parent_meta_crc != parent.footer.meta_crc {
        return Err(bad(
            80,
            format!(
                "its parent {} is not the file it was written after (parent checksum {:08x}, \
                 the file there has {:08x}): that file comes from another run or store",
                describe(p.version),
                c.parent_meta_crc,
                parent.footer.meta_crc
            ),
        ));
    }
    let in_parent: HashMap<u64, &RegionEntry> = parent.regions.iter().map(|r| (r.id, r)).collect();
    for r in &child.regions {
        if r.born > p.version {
            if r.born != c.version {
                return Err(bad(
                    0,
                    format!(
                        "region {} was born in version {}, which is not in its chain",
                        r.id, r.born
                    ),
                ));
            }
            continue;
        }
        match in_parent.get(&r.id).copied() {
            Some(o) if o == r => {}
            Some(o) => {
                return Err(bad(
                    0,
                    format!(
                        "region {} changes within one incarnation: {} bytes at page offset {} \
                         born {} here, {} bytes at {} born {} in its parent {}",
                        r.id,
                        r.length,
                        r.page_offset,
                        r.born,
                        o.length,
                        o.page_offset,
                        o.born,
                        p.version
                    ),
                ))
            }
            None => {
                return Err(bad(
                    0,
                    format!(
                        "region {} (born in version {}) is missing from its parent {}",
                        r.id, r.born, p.version
                    ),
                ))
            }
        }
    }
    Ok(())
}
