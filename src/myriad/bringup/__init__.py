"""Bringing nodes up: the verbs, the cluster's state folder, the site playbook run, retries."""
