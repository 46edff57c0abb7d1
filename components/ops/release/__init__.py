"""The release controller's former module path (components.controllers.release)."""
