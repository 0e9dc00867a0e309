"""Day-2 operations on a running Slurm cluster: drain, resume, rolling changes."""
