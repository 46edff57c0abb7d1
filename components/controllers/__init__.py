"""Controllers that run in their own containers: the release controller, KWOK's configuration."""
