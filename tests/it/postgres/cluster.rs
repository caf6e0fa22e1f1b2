//! A throwaway PostgreSQL cluster for the tests of one run: `initdb` into
//! a temporary directory (as the `postgres` user through `runuser` when
//! the tests run as root, since PostgreSQL refuses to run as root), a
//! free loopback port, its socket in that directory, `fsync = on`.
//! Started on first use, shared by every PostgreSQL test of the run (each
//! gets a database of its own), stopped and removed when the test binary
//! exits. Where PostgreSQL is not installed, every test that needs it
//! fails with one line saying what to install.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

use ledgerwire::ledger::Ledger;
use ledgerwire::ledger::postgres::{PostgresSettings, PostgresStore};

/// What to run when PostgreSQL is missing.
const INSTALL: &str = "PostgreSQL is not installed: run `apt-get install -y postgresql` (scripts/test does it as root)";

/// The cluster of this test run.
pub struct Cluster {
    /// Holds the data directory and the socket; removed at exit.
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    /// The unprivileged user the server runs as, when the tests run as root.
    user: Option<String>,
}

static CLUSTER: OnceLock<Cluster> = OnceLock::new();
static DATABASES: AtomicU32 = AtomicU32::new(0);

/// The cluster, started on the first call.
pub fn cluster() -> &'static Cluster {
    CLUSTER.get_or_init(|| {
        let cluster = Cluster::start();
        // SAFETY: registers a plain function run once at exit.
        unsafe { libc::atexit(stop_at_exit) };
        cluster
    })
}

/// A cluster of its own, for a test that stops and restarts it (the
/// shared one serves other tests meanwhile); stopped and removed when
/// dropped.
pub fn dedicated() -> Cluster {
    Cluster::start()
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
fn bin_dir() -> PathBuf {
    let installed = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .max_by_key(|bin| {
            bin.parent()
                .and_then(|v| v.file_name())
                .and_then(|v| v.to_str())
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(0)
        });
    if let Some(bin) = installed {
        return bin;
    }
    let output = Command::new("pg_config").arg("--bindir").output();
    match output {
        Ok(output) if output.status.success() => {
            PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
        }
        _ => panic!("{INSTALL}"),
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid(2) has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

impl Cluster {
    fn start() -> Self {
        let bin = bin_dir();
        let user = is_root().then(|| "postgres".to_owned());
        let dir = tempfile::Builder::new()
            .prefix("ledgerwire-pg-")
            .tempdir()
            .expect("a temporary directory")
            .keep();
        if let Some(user) = &user {
            let chown = Command::new("chown")
                .arg(user)
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(chown.success(), "cannot give {} to {user}", dir.display());
        }
        let port = free_port();
        let cluster = Self {
            dir,
            bin,
            port,
            user,
        };
        cluster.run(
            "initdb",
            &[
                "-D",
                &cluster.data().display().to_string(),
                "-A",
                "trust",
                "-U",
                "postgres",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        cluster.pg_ctl_start();
        cluster
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    pub fn bin(&self, tool: &str) -> PathBuf {
        self.bin.join(tool)
    }

    /// A command running `tool` of the installation as the cluster's user.
    pub fn command(&self, tool: &str) -> Command {
        match &self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(self.bin(tool));
                command
            }
            None => Command::new(self.bin(tool)),
        }
    }

    fn run(&self, tool: &str, args: &[&str]) {
        let output = self
            .command(tool)
            .args(args)
            .current_dir(&self.dir)
            .output()
            .unwrap_or_else(|error| panic!("{INSTALL} ({tool}: {error})"));
        assert!(
            output.status.success(),
            "{tool} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Starts the server and waits until it accepts connections.
    pub fn pg_ctl_start(&self) {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=500 -c shared_buffers=64MB",
            self.port,
            self.dir.display()
        );
        let data = self.data().display().to_string();
        let log = self.dir.join("server.log").display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D", &data, "-o", &options, "-l", &log, "-w", "-t", "60", "start",
            ],
        );
    }

    /// Stops the server the way a crash would (`-m immediate`: no
    /// checkpoint, every backend killed; recovery replays the WAL).
    pub fn pg_ctl_stop_immediate(&self) {
        let data = self.data().display().to_string();
        self.run("pg_ctl", &["-D", &data, "-m", "immediate", "-w", "stop"]);
    }

    /// A shell command that restarts the server as a crash would, for
    /// `crashtest --db-restart-cmd`.
    pub fn restart_shell_command(&self) -> String {
        let restart = format!(
            "{} -D {} -l {} -m immediate -w -t 60 restart",
            self.bin("pg_ctl").display(),
            self.data().display(),
            self.dir.join("server.log").display()
        );
        match &self.user {
            Some(user) => format!("runuser -u {user} -- {restart}"),
            None => restart,
        }
    }

    /// The URL of `database`.
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }

    /// A new, empty database of its own for one test; its URL.
    pub async fn fresh_database(&self) -> String {
        let name = format!(
            "t{}_{}",
            std::process::id(),
            DATABASES.fetch_add(1, Ordering::SeqCst)
        );
        let client = self.connect("postgres").await;
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("create a test database");
        self.url(&name)
    }

    /// A plain connection to `database` (its task runs on the caller's
    /// runtime).
    pub async fn connect(&self, database: &str) -> tokio_postgres::Client {
        connect_url(&self.url(database)).await
    }
}

/// A plain connection to `url`.
pub async fn connect_url(url: &str) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test cluster");
    tokio::spawn(async move {
        let _ = connection.await;
    });
    client
}

/// A fresh database with the store open on it.
pub async fn fresh_store() -> (String, Ledger) {
    let url = cluster().fresh_database().await;
    let ledger = open_ledger(&url).await;
    (url, ledger)
}

/// The store on `url`.
pub async fn open_ledger(url: &str) -> Ledger {
    let settings = PostgresSettings::from_url(url).expect("a PostgreSQL URL");
    PostgresStore::open_ledger(&settings)
        .await
        .expect("open the PostgreSQL store")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

extern "C" fn stop_at_exit() {
    if let Some(cluster) = CLUSTER.get() {
        cluster.stop_and_remove();
    }
}

impl Cluster {
    fn stop_and_remove(&self) {
        let data = self.data().display().to_string();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "-m", "immediate", "-w", "stop"])
            .current_dir(&self.dir)
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.stop_and_remove();
    }
}
