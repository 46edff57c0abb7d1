"""Back-ends the stack's providers run during `pulumi up`, each named as its provider in components.providers."""
