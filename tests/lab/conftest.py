"""Lab tier: the stack's own components through the real Pulumi engine on a Docker host, with the
docker and command provider plugins (tests/support/plugins.py says where they come from). CI
cannot obtain those plugins, so it does not run this tier: each test is skipped naming the
plugin. Developer-run: GPU_TENANCY_PROVIDER_PLUGINS=DIR .venv/bin/python -m pytest tests/lab."""
