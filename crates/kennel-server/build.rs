//! Sets `KENNEL_VERSION` for `kennel --version`: the package version and,
//! when the source is a git checkout, its short revision
//! (`0.1.0 (276ddde)`). `KENNEL_GIT_REV` in the environment stands in for
//! git (a container build has no `.git`); with neither, the version alone.

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (!text.is_empty()).then_some(text)
}

/// Builds again when `file` changes. A file that is not there is not
/// named: cargo would run the script at every build for it.
fn watch(file: Option<String>) {
    if let Some(file) = file.filter(|f| std::path::Path::new(f).exists()) {
        println!("cargo::rerun-if-changed={file}");
    }
}

fn main() {
    println!("cargo::rerun-if-env-changed=KENNEL_GIT_REV");
    let version = env!("CARGO_PKG_VERSION");
    let rev = std::env::var("KENNEL_GIT_REV")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| {
            let rev = git(&["rev-parse", "--short", "HEAD"])?;
            // Build again when HEAD moves: HEAD itself, and the branch it names.
            for path in [
                Some("HEAD".to_owned()),
                git(&["symbolic-ref", "-q", "HEAD"]),
            ]
            .into_iter()
            .flatten()
            {
                watch(git(&[
                    "rev-parse",
                    "--path-format=absolute",
                    "--git-path",
                    &path,
                ]));
            }
            watch(git(&[
                "rev-parse",
                "--path-format=absolute",
                "--git-path",
                "packed-refs",
            ]));
            Some(rev)
        });
    match rev {
        Some(rev) => println!("cargo::rustc-env=KENNEL_VERSION={version} ({rev})"),
        None => println!("cargo::rustc-env=KENNEL_VERSION={version}"),
    }
}
