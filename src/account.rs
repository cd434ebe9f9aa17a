//! A user account of this machine (its uid, its primary and supplementary groups), and
//! what the permission bits on the way to a path let that account do there.
//!
//! `crontab --install` asks this for the user whose crontab it writes, who is often not
//! the user running it (`--user` under root). It reads mode bits instead of running
//! `test -r` as that user through `runuser`: that needs no root and no util-linux, starts
//! no process, and can name the file or folder in the way and the `chmod` that opens
//! it. What bits do not show (ACLs, read-only mounts, SELinux) it does not see: it
//! catches the common mistakes, it does not promise that cron will succeed.

use std::ffi::CString;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::unistd::{Gid, Group, Uid, User, getgid, getgrouplist, getuid};

/// Read permission, as in a mode's `r` bit.
pub const READ: u32 = 0o4;
/// Write permission, as in a mode's `w` bit.
pub const WRITE: u32 = 0o2;
/// Execute permission (search, on a folder), as in a mode's `x` bit.
pub const EXECUTE: u32 = 0o1;

/// A user as the kernel judges its access: uid, primary group, supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    /// The login name, as `crontab -u` takes it.
    pub name: String,
    /// The user id.
    pub uid: u32,
    /// The primary group id.
    pub gid: u32,
    /// Every group the user is in, the primary one included.
    pub groups: Vec<u32>,
}

/// Why an account may not do something to a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Denied {
    /// The path, or a folder on the way to it, does not exist.
    Missing(PathBuf),
    /// `path` (the target itself, or a folder on the way to it) lacks `missing` bits
    /// for the account, which falls in `class` (`u`, `g` or `o`; `a` for root, who
    /// only needs one `x` bit anywhere to execute).
    Blocked {
        /// The file or folder in the way.
        path: PathBuf,
        /// The permission bits it lacks (`READ`, `WRITE`, `EXECUTE`, or'd).
        missing: u32,
        /// Which of the path's owner (`u`), group (`g`) or others (`o`) the account counts
        /// as there; `a` for root.
        class: char,
        /// The path's mode as `ls -l` shows it (`drwxr-x---`), for the message.
        mode: String,
        /// The path's owner, by name when the system has one, else the uid.
        owner: String,
        /// The path's group, by name when the system has one, else the gid.
        group: String,
    },
}

impl Denied {
    /// The `chmod` that lifts the block: `chmod o+r /srv/app/backlog.toml`.
    pub fn chmod(&self) -> Option<String> {
        match self {
            Denied::Missing(_) => None,
            Denied::Blocked {
                path,
                missing,
                class,
                ..
            } => Some(format!(
                "chmod {class}+{} {}",
                letters(*missing),
                path.display()
            )),
        }
    }
}

/// `rwx` letters of a 3-bit permission: `0o3` is `wx`.
fn letters(bits: u32) -> String {
    [(READ, 'r'), (WRITE, 'w'), (EXECUTE, 'x')]
        .iter()
        .filter(|(bit, _)| bits & bit != 0)
        .map(|(_, c)| c)
        .collect()
}

/// A mode as `ls -l` shows it: `drwxr-x---`.
fn mode_string(meta: &std::fs::Metadata) -> String {
    let mode = meta.permissions().mode();
    let kind = if meta.is_dir() { 'd' } else { '-' };
    let mut s = String::from(kind);
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 0o7;
        s.push(if bits & READ != 0 { 'r' } else { '-' });
        s.push(if bits & WRITE != 0 { 'w' } else { '-' });
        s.push(if bits & EXECUTE != 0 { 'x' } else { '-' });
    }
    s
}

impl Account {
    /// The account named `name`; `None` when this machine has no such user.
    pub fn named(name: &str) -> std::io::Result<Option<Account>> {
        // A name with a NUL byte names no one.
        from_passwd(User::from_name(name))
    }

    /// The account running this process (its real uid, as `crontab` judges it).
    pub fn current() -> std::io::Result<Account> {
        let uid = getuid().as_raw();
        let found = from_passwd(User::from_uid(Uid::from_raw(uid)))?;
        Ok(found.unwrap_or_else(|| {
            // A uid without a passwd entry (a container's arbitrary uid) still has
            // its own access; its groups are what this process holds.
            let gid = getgid().as_raw();
            Account {
                name: uid.to_string(),
                uid,
                gid,
                groups: vec![gid],
            }
        }))
    }

    /// Whether the account may do `wanted` (`READ | WRITE`…) to `path`, judged by the
    /// mode bits of the path and of every folder on the way to it (each needs `x`).
    pub fn may(&self, path: &Path, wanted: u32) -> Result<(), Denied> {
        let real = std::fs::canonicalize(path).map_err(|_| Denied::Missing(path.into()))?;
        let mut on_the_way: Vec<&Path> = real.ancestors().skip(1).collect();
        on_the_way.reverse();
        for folder in on_the_way {
            self.check(folder, EXECUTE)?;
        }
        self.check(&real, wanted)
    }

    fn check(&self, path: &Path, wanted: u32) -> Result<(), Denied> {
        let meta = std::fs::metadata(path).map_err(|_| Denied::Missing(path.into()))?;
        let mode = meta.permissions().mode();
        let (class, granted) = if self.uid == 0 {
            // Root reads and writes anything; it executes a file only if someone may.
            let any_x = meta.is_dir() || mode & 0o111 != 0;
            ('a', READ | WRITE | if any_x { EXECUTE } else { 0 })
        } else if meta.uid() == self.uid {
            ('u', (mode >> 6) & 0o7)
        } else if self.groups.contains(&meta.gid()) {
            ('g', (mode >> 3) & 0o7)
        } else {
            ('o', mode & 0o7)
        };
        let missing = wanted & !granted;
        if missing == 0 {
            return Ok(());
        }
        Err(Denied::Blocked {
            path: path.into(),
            missing,
            class,
            mode: mode_string(&meta),
            owner: user_name(meta.uid()),
            group: group_name(meta.gid()),
        })
    }
}

/// The account of a passwd lookup's answer.
fn from_passwd(found: nix::Result<Option<User>>) -> std::io::Result<Option<Account>> {
    match found {
        Ok(Some(user)) => {
            let groups = group_list(&user);
            Ok(Some(Account {
                name: user.name,
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
                groups,
            }))
        }
        Ok(None) => Ok(None),
        // Some libcs say "not found" with an errno instead of a null result.
        Err(Errno::ENOENT | Errno::ESRCH | Errno::EBADF | Errno::EPERM) => Ok(None),
        Err(errno) => Err(std::io::Error::from(errno)),
    }
}

/// The groups of a user, its primary group first; the primary group alone when the
/// list cannot be had.
fn group_list(user: &User) -> Vec<u32> {
    let Ok(name) = CString::new(user.name.as_str()) else {
        return vec![user.gid.as_raw()];
    };
    match getgrouplist(&name, user.gid) {
        Ok(groups) => groups.into_iter().map(Gid::as_raw).collect(),
        Err(_) => vec![user.gid.as_raw()],
    }
}

/// A user's name for a message, or its uid when it has none.
fn user_name(uid: u32) -> String {
    match User::from_uid(Uid::from_raw(uid)) {
        Ok(Some(user)) => user.name,
        _ => uid.to_string(),
    }
}

/// A group's name for a message, or its gid when it has none.
fn group_name(gid: u32) -> String {
    match Group::from_gid(Gid::from_raw(gid)) {
        Ok(Some(group)) => group.name,
        _ => gid.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nobody_like() -> Account {
        Account {
            name: "someone".into(),
            uid: 4_000_000,
            gid: 4_000_000,
            groups: vec![4_000_000],
        }
    }

    fn chmod(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn root_exists_and_a_made_up_name_does_not() {
        let root = Account::named("root").unwrap().unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert_eq!(Account::named("no-such-user-here").unwrap(), None);
        assert_eq!(Account::named("nul\0byte").unwrap(), None);
    }

    #[test]
    fn others_are_judged_by_the_other_bits_and_every_folder_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        let someone = nobody_like();
        chmod(dir.path(), 0o755);
        chmod(&file, 0o644);
        assert_eq!(someone.may(&file, READ), Ok(()));
        let denied = someone.may(&file, READ | WRITE).unwrap_err();
        assert_eq!(
            denied.chmod().unwrap(),
            format!("chmod o+w {}", file.display())
        );
        chmod(dir.path(), 0o700);
        let denied = someone.may(&file, READ).unwrap_err();
        let Denied::Blocked { path, mode, .. } = &denied else {
            panic!("{denied:?}")
        };
        assert_eq!((path.as_path(), mode.as_str()), (dir.path(), "drwx------"));
        assert_eq!(
            someone.may(&dir.path().join("none"), READ),
            Err(Denied::Missing(dir.path().join("none")))
        );
    }

    #[test]
    fn a_group_member_gets_the_group_bits() {
        let dir = tempfile::tempdir().unwrap();
        let meta = std::fs::metadata(dir.path()).unwrap();
        chmod(dir.path(), 0o070);
        let mut member = nobody_like();
        member.groups.push(meta.gid());
        assert_eq!(member.may(dir.path(), READ | WRITE | EXECUTE), Ok(()));
        assert!(nobody_like().may(dir.path(), READ).is_err());
        chmod(dir.path(), 0o700);
    }

    #[test]
    fn root_executes_only_what_has_an_x_bit() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        chmod(&file, 0o600);
        let root = Account {
            name: "root".into(),
            uid: 0,
            gid: 0,
            groups: vec![0],
        };
        assert_eq!(root.may(&file, READ | WRITE), Ok(()));
        assert_eq!(
            root.may(&file, EXECUTE).unwrap_err().chmod().unwrap(),
            format!("chmod a+x {}", file.display())
        );
    }
}
