//! openraft's storage test suite against beanpole's log storage and state
//! machine, each built in a fresh temporary directory.

use beanpole_cluster::types::{StorageError, TypeConfig};
use beanpole_cluster::{open_storage, LogStore, StateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::StorageIOError;
use tempfile::TempDir;

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, TempDir> for Builder {
    async fn build(&self) -> Result<(TempDir, LogStore, StateMachine), StorageError> {
        let dir = TempDir::new().map_err(|e| StorageIOError::write(anyerror::AnyError::new(&e)))?;
        let (log, sm) = open_storage(dir.path())
            .map_err(|e| StorageIOError::write(anyerror::AnyError::new(&e)))?;
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite_passes() {
    if let Err(e) = Suite::test_all(Builder) {
        panic!("the storage suite failed: {e}");
    }
}
