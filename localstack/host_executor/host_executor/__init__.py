"""A LocalStack Lambda executor that runs Python handlers as host subprocesses."""
