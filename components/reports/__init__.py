"""Offline and live reports: capacity, plans, the fleet picture, the image list (the only place matplotlib lives)."""
