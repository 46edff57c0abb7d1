"""CrossGuard pack `gpu-quotas`: starts the policy server (blocks); policies are in gpu_policies."""

from gpu_policies import POLICIES
from gpu_tenants import receive_stack_config
from pulumi_policy import EnforcementLevel, PolicyPack

receive_stack_config()
PolicyPack(name="gpu-quotas", enforcement_level=EnforcementLevel.MANDATORY, policies=POLICIES)
