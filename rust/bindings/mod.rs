//! PyO3 bindings (stub).
