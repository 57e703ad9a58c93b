//! Rebuilds when a migration is added: `sqlx::migrate!` embeds the directory's files, and
//! Cargo does not otherwise notice a new file there.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
