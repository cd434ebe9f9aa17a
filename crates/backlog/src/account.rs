//! A user account of this machine (its uid, its primary and supplementary groups), and
//! what the permission bits on the way to a path let that account do there.
//!
//! `crontab --install` asks this for the user whose crontab it writes, who is often not
//! the user running it (`--user` under root). It reads mode bits instead of running
//! `test -r` as that user through `runuser`: that needs no root and no util-linux, starts
//! no process, and can name the file or folder in the way and the `chmod` that opens
//! it. What bits do not show (ACLs, read-only mounts, SELinux) it does not see: it
//! catches the common mistakes, it does not promise that cron will succeed.

use std::ffi::{CStr, CString};
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

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
        let Ok(c_name) = CString::new(name) else {
            return Ok(None);
        };
        lookup_user(|pwd, buf, result| unsafe {
            libc::getpwnam_r(c_name.as_ptr(), pwd, buf.as_mut_ptr(), buf.len(), result)
        })
    }

    /// The account running this process (its real uid, as `crontab` judges it).
    pub fn current() -> std::io::Result<Account> {
        // SAFETY: getuid cannot fail.
        let uid = unsafe { libc::getuid() };
        let found = lookup_user(|pwd, buf, result| unsafe {
            libc::getpwuid_r(uid, pwd, buf.as_mut_ptr(), buf.len(), result)
        })?;
        Ok(found.unwrap_or_else(|| {
            // A uid without a passwd entry (a container's arbitrary uid) still has
            // its own access; its groups are what this process holds.
            // SAFETY: getgid cannot fail.
            let gid = unsafe { libc::getgid() };
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

/// Runs a `getpw*_r` call with a buffer that grows until the entry fits, and builds the
/// account from what it found.
fn lookup_user(
    call: impl Fn(*mut libc::passwd, &mut Vec<libc::c_char>, *mut *mut libc::passwd) -> libc::c_int,
) -> std::io::Result<Option<Account>> {
    let mut buf: Vec<libc::c_char> = vec![0; 1024];
    loop {
        // SAFETY: passwd is plain data; the call fills it and points its strings into buf.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        match call(&mut pwd, &mut buf, &mut result) {
            0 if result.is_null() => return Ok(None),
            0 => {
                // SAFETY: on success pw_name points to a NUL-terminated string in buf.
                let name = unsafe { CStr::from_ptr(pwd.pw_name) }
                    .to_string_lossy()
                    .into_owned();
                let groups = group_list(pwd.pw_name, pwd.pw_gid);
                return Ok(Some(Account {
                    name,
                    uid: pwd.pw_uid,
                    gid: pwd.pw_gid,
                    groups,
                }));
            }
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            // Some libcs say "not found" with an errno instead of a null result.
            libc::ENOENT | libc::ESRCH | libc::EBADF | libc::EPERM => return Ok(None),
            errno => return Err(std::io::Error::from_raw_os_error(errno)),
        }
    }
}

/// The groups of a user, its primary group first.
fn group_list(name: *const libc::c_char, gid: libc::gid_t) -> Vec<u32> {
    let mut groups: Vec<libc::gid_t> = vec![0; 64];
    loop {
        let mut count = groups.len() as libc::c_int;
        // SAFETY: groups has room for `count` entries; getgrouplist writes at most that
        // many and sets count to how many there are.
        let found = unsafe { libc::getgrouplist(name, gid, groups.as_mut_ptr(), &mut count) };
        if found >= 0 {
            groups.truncate(count.max(0) as usize);
            return groups;
        }
        if count as usize <= groups.len() {
            // It failed without saying how many: the primary group at least.
            return vec![gid];
        }
        groups.resize(count as usize, 0);
    }
}

/// A user's name for a message, or its uid when it has none.
fn user_name(uid: u32) -> String {
    let found = lookup_user(|pwd, buf, result| unsafe {
        libc::getpwuid_r(uid, pwd, buf.as_mut_ptr(), buf.len(), result)
    });
    match found {
        Ok(Some(account)) => account.name,
        _ => uid.to_string(),
    }
}

/// A group's name for a message, or its gid when it has none.
fn group_name(gid: u32) -> String {
    let mut buf: Vec<libc::c_char> = vec![0; 4096];
    loop {
        // SAFETY: group is plain data; the call points its strings into buf.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc =
            unsafe { libc::getgrgid_r(gid, &mut grp, buf.as_mut_ptr(), buf.len(), &mut result) };
        match rc {
            0 if !result.is_null() => {
                // SAFETY: on success gr_name points to a NUL-terminated string in buf.
                return unsafe { CStr::from_ptr(grp.gr_name) }
                    .to_string_lossy()
                    .into_owned();
            }
            libc::ERANGE if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            _ => return gid.to_string(),
        }
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
