//! `pimcp-run trust [DIR]`: record a project directory (and the hashes of its config files) as trusted, or forget it
//! with `--revoke`.

use std::path::PathBuf;

use clap::Args;

use super::Ctx;
use crate::EXIT_OK;
use crate::output::path;

#[derive(Debug, Args)]
pub(crate) struct TrustArgs {
    /// The project directory (default: `--project`, else the current directory).
    pub dir: Option<PathBuf>,
    /// Forget the directory instead.
    #[arg(long)]
    pub revoke: bool,
}

pub(crate) fn run(ctx: &Ctx, args: TrustArgs) -> anyhow::Result<u8> {
    let home = &ctx.opts.home;
    let dir = match args.dir {
        Some(dir) => {
            std::fs::canonicalize(&dir).map_err(|err| super::usage(format!("cannot use {}: {err}", dir.display())))?
        }
        None => ctx.opts.project_dir.clone(),
    };
    if !dir.is_dir() {
        return Err(super::usage(format!("{} is not a directory", dir.display())));
    }
    if args.revoke {
        let was = pimcp_config::untrust_project(&dir, &ctx.opts.data_dir)?;
        outln!(
            "{} {}",
            if was { "no longer trusted:" } else { "was not trusted:" },
            path(&dir, home)
        );
        return Ok(EXIT_OK);
    }
    let record = pimcp_config::trust_project(&dir, &ctx.opts.data_dir)?;
    outln!("trusted {}", path(&record.dir, home));
    for (file, exists) in &record.files {
        if *exists {
            outln!("  {}", path(file, home));
        }
    }
    outln!("Changing any of these files makes the project untrusted again until you run this command again.");
    Ok(EXIT_OK)
}
