"""Bringing nodes up: playbooks through ansible-runner, progress, recaps, retries."""
