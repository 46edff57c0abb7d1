"""Lab node containers and what they boot with: the container spec, kubeadm init, the registry mirror, storage."""
