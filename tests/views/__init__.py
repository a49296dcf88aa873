"""Tests of the view storage: one suite over the dict and the RocksDB key-value stores, and the StoreView on both."""
