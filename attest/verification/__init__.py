"""The server side: everything `attest verify` runs (envelope, trust store, artifacts, rollback,
probe). Free of torch and numpy (numpy only in the optional probe); this __init__ imports nothing."""
