//! `pgtide completions SHELL` and `pgtide man`: generated from the same
//! clap definitions as the parser (`args.rs`), so they never drift.

use clap::CommandFactory;

use crate::args::{Cli, ShellArg};

/// The completion script for `shell` on stdout.
pub fn completions(shell: ShellArg) -> pgtide::Result<u8> {
    let shell = match shell {
        ShellArg::Bash => clap_complete::Shell::Bash,
        ShellArg::Zsh => clap_complete::Shell::Zsh,
        ShellArg::Fish => clap_complete::Shell::Fish,
    };
    let mut buf = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "pgtide", &mut buf);
    super::write_stdout(&buf);
    Ok(crate::EXIT_OK)
}

/// The man page (roff): `pgtide man > pgtide.1`. One page: the top-level
/// command, then every subcommand's flags and long help.
pub fn man() -> pgtide::Result<u8> {
    let cmd = Cli::command();
    let mut buf = Vec::new();
    render(&cmd, &mut buf).map_err(|e| pgtide::Error::bug(format!("man page: {e}")))?;
    super::write_stdout(&buf);
    Ok(crate::EXIT_OK)
}

fn render(cmd: &clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    let man = clap_mangen::Man::new(cmd.clone());
    man.render(out)?;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        // Each subcommand as a section: its name, options and long help.
        let name = format!("{} {}", cmd.get_name(), sub.get_name());
        let man = clap_mangen::Man::new(sub.clone().bin_name(name.clone()));
        out.extend_from_slice(format!(".SH \"{}\"\n", name.to_uppercase()).as_bytes());
        let mut part = Vec::new();
        man.render_synopsis_section(&mut part)?;
        man.render_description_section(&mut part)?;
        man.render_options_section(&mut part)?;
        if sub.has_subcommands() {
            man.render_subcommands_section(&mut part)?;
        }
        man.render_extra_section(&mut part)?;
        // Its sections are subsections of the command's.
        let part = String::from_utf8_lossy(&part)
            .replace(".SH EXTRA", ".SS NOTES")
            .replace("\n.SH ", "\n.SS ");
        let part = part
            .strip_prefix(".SH ")
            .map_or(part.clone(), |p| format!(".SS {p}"));
        out.extend_from_slice(part.as_bytes());
    }
    Ok(())
}
