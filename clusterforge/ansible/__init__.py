"""Driving Ansible from the workstation through ansible-runner."""
