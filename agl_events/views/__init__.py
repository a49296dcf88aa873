"""Views: the store's state folded from the log, in RocksDB (or a dict for tests). Disposable, rebuildable."""
