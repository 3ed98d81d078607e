use crate::CmdResult;
use ickpt::sys::uffd;
use serde_json::json;
use std::process::ExitCode;

pub fn run(as_json: bool) -> CmdResult {
    let f = uffd::features();
    let yes = |b: bool| if b { "yes" } else { "no" };
    if as_json {
        let out = json!({
            "userfaultfd": f.userfaultfd,
            "uffd_features": format!("{:#x}", f.uffd_features),
            "uffd_write_protect": f.uffd_wp(),
            "uffd_write_protect_async": f.uffd_wp_async(),
            "pagemap_scan": f.pagemap_scan,
            "notes": f.notes,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("userfaultfd                     {}", yes(f.userfaultfd));
        println!("  write-protect                 {}", yes(f.uffd_wp()));
        println!("  async write-protect + scan    {}", yes(f.uffd_wp_async()));
        println!("PAGEMAP_SCAN                    {}", yes(f.pagemap_scan));
        for n in &f.notes {
            println!("note: {n}");
        }
        println!("mprotect + SIGSEGV              yes (always)");
    }
    Ok(ExitCode::SUCCESS)
}
