use crate::CmdResult;
use ickpt::probe;
use serde_json::json;
use std::process::ExitCode;

pub fn run(as_json: bool, list: bool) -> CmdResult {
    let f = probe::features()?;
    let available: Vec<&str> = probe::available()?.iter().map(|b| b.as_str()).collect();
    let auto = probe::auto_choice()?.as_str();
    if list && as_json {
        return Err(crate::UsageError(
            "--list and --json are two formats: give one (--json has the list as 'backends')",
        )
        .into());
    }
    if list {
        for b in &available {
            println!("{b}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let yes = |b: bool| if b { "yes" } else { "no" };
    let pid_ns = crate::pid_namespace::allowed();
    let timer_ids = ickpt_process::capture::timer_ids_restorable();
    if as_json {
        let out = json!({
            "userfaultfd": f.userfaultfd,
            "uffd_features": format!("{:#x}", f.uffd_features),
            "uffd_kernel_faults": f.kernel_faults,
            "uffd_write_protect": f.uffd_wp(),
            "uffd_write_protect_async": f.uffd_wp_async(),
            "pagemap_scan": f.pagemap_scan,
            "backends": available,
            "auto": auto,
            "pid_namespace": pid_ns.is_ok(),
            "pid_namespace_refused": pid_ns.as_ref().err(),
            "timer_restore_ids": timer_ids,
            "notes": f.notes,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        println!("userfaultfd                     {}", yes(f.userfaultfd));
        println!("  faults inside system calls    {}", yes(f.kernel_faults));
        println!("  write-protect                 {}", yes(f.uffd_wp()));
        println!("  async write-protect + scan    {}", yes(f.uffd_wp_async()));
        println!("PAGEMAP_SCAN                    {}", yes(f.pagemap_scan));
        println!("mprotect + SIGSEGV              yes (always)");
        println!("backends available              {}", available.join(", "));
        println!("auto picks                      {auto}");
        match &pid_ns {
            Ok(()) => println!("PID namespace (ickpt run)       yes: exact ids at restart"),
            Err(why) => {
                println!("PID namespace (ickpt run)       no ({why}): ids change at restart")
            }
        }
        println!(
            "POSIX timers (ickpt run)        {}",
            if timer_ids {
                "yes: created again with their ids (PR_TIMER_CREATE_RESTORE_IDS)"
            } else {
                "no: a checkpoint of a program with POSIX timers is refused (Linux 6.15 or later)"
            }
        );
        for n in &f.notes {
            println!("note: {n}");
        }
    }
    Ok(ExitCode::SUCCESS)
}
