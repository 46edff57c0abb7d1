"""The program's resource graph under mocks: every edge of the design's graph, the values sent
to each chart and custom resource, secrets kept secret. Providers and engine are mocked."""

import base64
import copy
import hashlib

import pytest
import yaml
from cryptography import x509

from components.config import versions
from components.controllers.release.policy import RBAC_RULES, READMIT_RULES
from components.domain import hami_annotations as ha
from components.kube.bound_token import self_renewal_rules
from components.kube.client import endpoint_kubeconfig
from components.nodes.management_node import INIT, INIT_CONFIG_PATH, init_configuration
from components.tenant.hami import scheduler_device_config
from tests.support.harness import (
    AUTOMATION_TOKEN,
    JOIN_TOKEN,
    KINDNET_TEMPLATE,
    MACHINE_ID,
    ROOT,
    SA_TOKEN,
    TENANT_CA_HASH,
    TENANT_SUPER,
    _issued,
    deps,
    load_config_file,
    provider_name,
    reaches,
    run_program,
)

DEV = load_config_file(ROOT / "Pulumi.dev.yaml")


@pytest.fixture(scope="module")
def rec():
    return run_program(DEV)


def test_management_cluster_edges(rec):
    assert {"management-network", "management-node-image"} <= deps(rec, "management-node")
    assert "management-node" in deps(rec, "management-init")
    assert "management-init" in deps(rec, "management-k8s")
    # Kamaji's DataStore claims volumes: the storage class exists before Kamaji's charts.
    for name in ("kamaji-cert-manager", "kamaji-kamaji"):
        assert "management-storage" in deps(rec, name), (name, deps(rec, name))


@pytest.mark.parametrize("node", ["management-node", "team-a-worker-0-container", "team-b-worker-0-container"])
def test_a_node_s_var_lives_and_dies_with_its_container(rec, node):
    """A replaced node must not boot on its predecessor's /var (its kubelet checkpoints, containerd
    store, etcd data): /var is an anonymous volume, removed with the container, and no Docker
    volume outlives it."""
    container = rec.named(node)
    var = [v for v in container.inputs["volumes"] if v["containerPath"] == "/var"]
    assert var == [{"containerPath": "/var"}], var
    assert container.inputs["removeVolumes"] is True
    assert container.delete_before_replace, "a fixed container name cannot exist twice"
    volumes = [r.name for r in rec.of_type("docker:index/volume:Volume")]
    assert not [v for v in volumes if v.endswith("-var")], volumes


def test_management_node_is_the_lab_s_node_image_with_the_project_s_init(rec):
    node = rec.named("management-node").inputs
    assert node["networksAdvanced"][0]["ipv4Address"] == "172.30.0.2"
    assert node["name"] == "gpu-lab-management" and node["privileged"] is True
    assert rec.named("management-node-image").inputs["name"] == (
        f"{versions.LAB_NODE_REPOSITORY}:{versions.MANAGEMENT_KUBERNETES_VERSION}"
    )
    uploads = {u["file"]: u["content"] for u in node["uploads"]}
    assert uploads[INIT_CONFIG_PATH] == init_configuration(
        "gpu-lab-management", "172.30.0.2", versions.MANAGEMENT_KUBERNETES_VERSION, "gpu-lab"
    )
    assert rec.named("management-init").inputs["create"] == INIT


def test_management_kubeconfig_is_secret(rec):
    kc = rec.named("management-k8s").inputs["kubeconfig"]
    assert set(kc) == {"secret"} or "secret" in kc


def test_k3s_stays_an_option():
    config = copy.deepcopy(DEV)
    config["gpu-tenancy:cluster"] = {**config.get("gpu-tenancy:cluster", {}), "distribution": "k3s"}
    rec = run_program(config)
    assert {"management-network", "management-k3s-image", "management-k3s-data"} <= deps(rec, "management-k3s")
    assert "management-k3s" in deps(rec, "management-k3s-kubeconfig")
    assert "management-k3s-kubeconfig" in deps(rec, "management-k8s")
    kc = rec.named("management-k8s").inputs["kubeconfig"]
    assert "secret" in kc
    assert "server: https://172.30.0.2:6443" in kc["secret"]
    assert "127.0.0.1" not in kc["secret"]
    k3s = rec.named("management-k3s").inputs
    assert "--tls-san=172.30.0.2" in k3s["command"]
    assert k3s["networksAdvanced"][0]["ipv4Address"] == "172.30.0.2"
    assert not [r for r in rec.registrations if r.name in ("management-node", "management-init", "management-storage")]


def test_kamaji_after_cert_manager_on_management_provider(rec):
    assert "kamaji-cert-manager" in deps(rec, "kamaji-kamaji")
    for name in ("kamaji-cert-manager", "kamaji-kamaji", "team-a-cp-tcp", "team-b-cp-tcp"):
        assert provider_name(rec.named(name)) == "management-k8s"


@pytest.mark.parametrize("team", ["team-a", "team-b"])
def test_tenant_edges(rec, team):
    assert {"kamaji-datastore", f"{team}-cp-ns"} <= deps(rec, f"{team}-cp-tcp")  # Kamaji (and its DataStore) first
    secret = rec.named(f"{team}-cp-admin-kubeconfig")
    assert secret.read_id == f"tenant-{team}/{team}-admin-kubeconfig"
    # the provider: the stack's own automation identity (a bound token), its cluster named by the
    # endpoint (known at preview); Kamaji's super-admin only makes that identity
    provider = rec.named(f"{team}-cp-k8s").inputs
    endpoint = provider["cluster"]
    assert endpoint == f"https://172.30.0.2:{31443 if team == 'team-a' else 31444}"
    kubeconfig = yaml.safe_load(provider["kubeconfig"]["secret"])
    assert kubeconfig["users"][0]["user"] == {"token": AUTOMATION_TOKEN}
    assert kubeconfig["clusters"][0]["cluster"]["server"] == endpoint
    bootstrap = rec.named(f"{team}-bootstrap-k8s").inputs
    assert bootstrap["cluster"] == endpoint
    assert bootstrap["kubeconfig"] == {"secret": endpoint_kubeconfig(TENANT_SUPER, endpoint)}
    token = rec.named(f"{team}-cp-automation-token")
    assert token.inputs["account"] == "gpu-tenancy-automation" and token.inputs["namespace"] == "kube-system"
    assert token.inputs["seconds"] == 365 * 24 * 3600
    assert token.inputs["renew_before_seconds"] == 30 * 24 * 3600
    binding = rec.named(f"{team}-cp-automation-binding")
    assert binding.inputs["roleRef"]["name"] == "cluster-admin"
    assert f"{team}-cp-automation-binding" in deps(rec, f"{team}-cp-automation-token")
    # the super-admin provider makes the identity and nothing else
    assert {r.name for r in rec.registrations if provider_name(r) == f"{team}-bootstrap-k8s"} == {
        f"{team}-cp-automation",
        f"{team}-cp-automation-binding",
    }
    # every tenant-side object goes through the tenant's own provider
    tenant_side = [
        f"{team}-bootstrap-node-bootstrapper",
        f"{team}-network-kindnet",
        f"{team}-gpus-gpu-lab-{team}-worker-0",
        f"{team}-hami-release",
    ]
    for name in tenant_side:
        assert provider_name(rec.named(name)) == f"{team}-cp-k8s", name


@pytest.mark.parametrize("team", ["team-a", "team-b"])
def test_worker_edges(rec, team):
    w = f"{team}-worker-0"
    assert {"management-network", f"{w}-image"} <= deps(rec, f"{w}-container")
    assert {f"{w}-container", f"{w}-token"} <= deps(rec, f"{w}-join")
    assert f"{team}-bootstrap-node-bootstrapper" in deps(rec, f"{w}-token")
    assert f"{w}-join" in deps(rec, f"{w}-membership")
    assert f"{w}-container" in deps(rec, f"{team}-network-cni-template")
    assert f"{team}-network-cni-template" in deps(rec, f"{team}-network-kindnet")
    node_patch = f"{team}-gpus-gpu-lab-{team}-worker-0"
    assert {f"{w}-membership", f"{w}-labels"} <= deps(rec, node_patch)
    assert node_patch in deps(rec, f"{node_patch}-capacity")
    assert {f"{w}-membership", f"{w}-labels", f"{node_patch}-capacity"} <= deps(rec, f"{w}-settled")
    hami = deps(rec, f"{team}-hami-release")
    assert {f"{w}-settled", f"{team}-network-kindnet", node_patch, f"{node_patch}-capacity"} <= hami


def test_join_takes_its_token_on_stdin_with_the_ca_pinned(rec):
    join = rec.named("team-a-worker-0-join")
    config = yaml.safe_load(join.inputs["stdin"]["secret"])  # a secret, never in the state in clear
    token = config["discovery"]["bootstrapToken"]
    assert token["token"] == JOIN_TOKEN and token["caCertHashes"] == [TENANT_CA_HASH]
    assert token["apiServerEndpoint"] == "172.30.0.2:31443"
    assert config["nodeRegistration"]["name"] == "gpu-lab-team-a-worker-0"
    script = join.inputs["create"]
    assert "kubeadm join --config" in script and "--token" not in script and "unsafe-skip-ca" not in script
    assert "delete" not in join.inputs  # no clean-up by name: NodeMembership acts on the node's identity
    assert set(join.inputs["environment"]) == {"NODE"}  # no kubeconfig: it cannot re-run the join
    assert join.inputs["triggers"] == ["team-a-worker-0-container-id"]  # the container's id alone


def test_worker_replacement_never_touches_its_successor(rec):
    container = rec.named("team-a-worker-0-container")
    assert container.inputs["name"] == "gpu-lab-team-a-worker-0" and container.inputs["privileged"] is True
    assert container.delete_before_replace, "a fixed container name cannot exist twice"
    m = rec.named("team-a-worker-0-membership")
    assert m.type == "pulumi-python:dynamic/gpu-tenancy:NodeMembership"
    assert m.inputs["machine_id"] == MACHINE_ID and m.inputs["node"] == "gpu-lab-team-a-worker-0"
    assert "secret" in m.inputs["kubeconfig"]


def test_each_worker_gets_a_short_lived_token_of_its_own(rec):
    a = rec.named("team-a-worker-0-token")
    b = rec.named("team-b-worker-0-token")
    assert a.type == "pulumi-python:dynamic/gpu-tenancy:BootstrapToken"
    assert a.inputs["ttl_seconds"] == 15 * 60
    assert len(a.inputs["token_id"]) == 6 and a.inputs["token_id"] != b.inputs["token_id"]
    assert rec.named("team-a-worker-0-membership").inputs["token_id"] == a.inputs["token_id"]


def test_cni_rendered_with_tenant_pod_cidr(rec):
    a = rec.named("team-a-network-kindnet").inputs["yaml"]
    b = rec.named("team-b-network-kindnet").inputs["yaml"]
    assert a == KINDNET_TEMPLATE.replace("{{ .PodSubnet }}", "10.244.0.0/16")
    assert "10.245.0.0/16" in b


def test_inventory_annotations_and_capacity(rec):
    a = rec.named("team-a-gpus-gpu-lab-team-a-worker-0").inputs["metadata"]
    mock = "node-restriction.kubernetes.io/gpu-tenancy-mock-gpu"  # a kubelet cannot set it on itself
    assert a["labels"] == {"gpu": "on", mock: "true", "gpu-tenancy/gpu-model": "A100-80GB"}
    assert a["annotations"]["hami.io/node-nvidia-register"] == (
        '[{"id":"GPU-team-a-gpu-lab-team-a-worker-0-0","index":0,"count":10,"devmem":81920,"devcore":100,'
        '"type":"NVIDIA A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
    )
    cap_a = rec.named("team-a-gpus-gpu-lab-team-a-worker-0-capacity").inputs
    cap_b = rec.named("team-b-gpus-gpu-lab-team-b-worker-0-capacity").inputs
    assert (cap_a["node"], cap_a["count"]) == ("gpu-lab-team-a-worker-0", 10)
    assert cap_b["count"] == 40
    assert "secret" in cap_a["kubeconfig"]
    assert rec.named("team-a-gpus-gpu-lab-team-a-worker-0-capacity").type == (
        "pulumi-python:dynamic/gpu-tenancy:NodeGpuCapacity"
    )


def test_chart_values(rec):
    cm = rec.named("kamaji-cert-manager").inputs
    assert (cm["chart"], cm["version"], cm["values"]) == ("cert-manager", "v1.18.3", {"crds": {"enabled": True}})
    k = rec.named("kamaji-kamaji").inputs
    assert (k["name"], k["namespace"], k["version"]) == ("kamaji", "kamaji-system", "0.0.0+latest")
    assert k["repositoryOpts"]["repo"] == "https://clastix.github.io/charts"
    assert k["values"]["image"] == {"tag": "26.8.2-edge", "pullPolicy": "IfNotPresent"}
    assert k["values"]["telemetry"] == {"disabled": True}
    h = rec.named("team-b-hami-release").inputs
    assert (h["chart"], h["version"], h["name"], h["namespace"]) == ("hami", "2.8.3", "hami", "hami-system")
    v = h["values"]
    assert v["devicePlugin"]["enabled"] is False and v["mockDevicePlugin"] == {"enabled": True}
    # The extender at v2.10.0 (2.8.3 leaks quota usage on re-filter); the chart's other images at
    # its own tag: the chart's global.imageTag, when set, wins over every image's own tag.
    assert v["global"] == {"imageTag": ""}
    assert v["scheduler"]["extender"]["image"] == {"tag": "v2.10.0"}
    assert v["devicePlugin"]["image"] == v["devicePlugin"]["monitor"]["image"] == {"tag": "v2.8.3"}
    assert v["scheduler"]["kubeScheduler"]["image"] == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.35.1",
    }
    # HAMi tuned for fleets (bench/hami_fleet.py): its client rate, log level and node policy
    assert v["scheduler"]["extender"]["extraArgs"] == [
        "--kube-qps=200",
        "--kube-burst=400",
        "-v=1",
        "--node-lock-timeout=5m",
        # last: the chart's own --device-config-file comes before extraArgs, and the last one wins
        "--device-config-file=/tls/device-config.yaml",
    ]
    assert v["scheduler"]["kubeScheduler"]["extraNewArgs"] == ["--config=/config/config.yaml", "-v=1"]
    assert v["scheduler"]["defaultSchedulerPolicy"] == {"nodeSchedulerPolicy": "spread", "gpuSchedulerPolicy": "spread"}
    assert v["scheduler"]["service"]["type"] == "ClusterIP"


def _pem_cert(pem: str) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem.encode())


@pytest.mark.parametrize("team", ["team-a", "team-b"])
def test_hamis_webhook_certificate_is_the_stacks_own(rec, team):
    """No certgen job (its image is a personal account's copy, not buildable here): the stack makes
    the certificate, puts it in the Secret the chart mounts before the chart, and its CA in the
    chart's webhook configuration after it, before the probe asks the webhook."""
    cert = rec.named(f"{team}-hami-webhook-certificate")
    assert cert.type == "pulumi-python:dynamic/gpu-tenancy:WebhookCertificate"
    assert cert.inputs["dns_names"] == [
        "hami-scheduler.hami-system.svc",
        "hami-scheduler.hami-system.svc.cluster.local",
    ]
    assert cert.inputs["ip_addresses"] == ["127.0.0.1"]
    issued = _issued(f"{team}-hami-webhook-certificate", tuple(cert.inputs["dns_names"]), ("127.0.0.1",))

    secret = rec.named(f"{team}-hami-webhook-tls")
    assert provider_name(secret) == f"{team}-cp-k8s"
    assert secret.inputs["metadata"] == {"name": "hami-scheduler-tls", "namespace": "hami-system"}
    assert secret.inputs["type"] == "kubernetes.io/tls"
    # The key makes the whole map a secret (the engine never shows it, nor stores it in clear).
    assert secret.inputs["stringData"] == {
        "secret": {
            "tls.crt": issued.cert_pem,
            "tls.key": issued.key_pem,
            "ca.crt": issued.ca_pem,
            "device-config.yaml": scheduler_device_config(),  # the extender's, beside it at /tls
        }
    }
    assert f"{team}-hami-namespace" in deps(rec, f"{team}-hami-webhook-tls")
    assert rec.named(f"{team}-hami-namespace").inputs["metadata"] == {"name": "hami-system"}

    release = rec.named(f"{team}-hami-release")
    assert {f"{team}-hami-webhook-tls"} <= deps(rec, f"{team}-hami-release")
    annotations = release.inputs["values"]["scheduler"]["podAnnotations"]
    # a new certificate or device config restarts it
    assert annotations == {
        "gpu-tenancy/webhook-certificate": issued.fingerprint,
        "gpu-tenancy/scheduler-files": hashlib.sha256(
            yaml.safe_dump({"device-config.yaml": scheduler_device_config()}, sort_keys=True).encode()
        ).hexdigest()[:16],
    }

    ca = rec.named(f"{team}-hami-webhook-ca")
    assert ca.type == "kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfigurationPatch"
    assert provider_name(ca) == f"{team}-cp-k8s"
    assert ca.inputs["metadata"] == {"name": "hami-webhook"}
    (webhook,) = ca.inputs["webhooks"]
    assert webhook == {
        "name": "vgpu.hami.io",
        "clientConfig": {"caBundle": base64.b64encode(issued.ca_pem.encode()).decode()},
    }
    assert f"{team}-hami-release" in deps(rec, f"{team}-hami-webhook-ca")
    assert f"{team}-hami-webhook-ca" in deps(rec, f"{team}-hami-webhook-probe")


def test_the_extenders_device_config_is_one_both_hami_versions_parse():
    """HAMi's extender (v2.10.0) reads `vnpus` as a map and the chart's device plugins (2.8.3, mock
    1.0.1) as a list: the extender's own config names no section but NVIDIA's, with the resource
    names the stack's workloads and inventory use."""
    config = yaml.safe_load(scheduler_device_config())
    assert list(config) == ["nvidia"]
    nvidia = config["nvidia"]
    assert (nvidia["resourceCountName"], nvidia["resourceMemoryName"], nvidia["resourceCoreName"]) == (
        ha.RES_GPU,
        ha.RES_GPUMEM,
        ha.RES_GPUCORES,
    )
    assert nvidia["resourceMemoryPercentageName"] == ha.RES_GPUMEM_PERCENTAGE
    assert nvidia["memoryFactor"] == 1 and nvidia["deviceSplitCount"] == 10


def test_each_tenant_trusts_only_its_own_webhook_ca(rec):
    a, b = (
        _issued(
            f"{t}-hami-webhook-certificate",
            tuple(rec.named(f"{t}-hami-webhook-certificate").inputs["dns_names"]),
            ("127.0.0.1",),
        )
        for t in ("team-a", "team-b")
    )
    assert a.ca_pem != b.ca_pem
    _pem_cert(a.cert_pem).verify_directly_issued_by(_pem_cert(a.ca_pem))
    with pytest.raises(Exception):  # noqa: B017 - any refusal: another tenant's CA signed nothing of a's
        _pem_cert(a.cert_pem).verify_directly_issued_by(_pem_cert(b.ca_pem))


def test_tenants_share_nothing_that_could_collide(rec):
    names = [r.inputs.get("name") for r in rec.of_type("docker:index/container:Container")]
    assert len(names) == len(set(names)) == 5  # k3s, a worker and a release controller per tenant
    tcps = rec.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane")
    ports = [
        p
        for t in tcps
        for p in (
            t.inputs["spec"]["networkProfile"]["port"],
            t.inputs["spec"]["addons"]["konnectivity"]["server"]["port"],
        )
    ]
    assert len(ports) == len(set(ports)) == 4
    # Registration order follows output resolution, which is not fixed; the names are what matter.
    schemas = sorted(t.inputs["spec"]["dataStoreSchema"] for t in tcps)
    assert schemas == ["gpu_tenancy_dev_team_a", "gpu_tenancy_dev_team_b"]


def test_stack_outputs(rec):
    out = rec.stack_outputs
    a = out["team-a"]
    assert a["endpoint"] == "https://172.30.0.2:31443"
    assert "secret" in a["kubeconfig"]
    assert a["pools"] == {"worker": {"mode": "docker", "nodes": ["gpu-lab-team-a-worker-0"]}}
    assert a["gpuInventory"] == {
        "model": "NVIDIA A100 80GB",
        "cards": 1,
        "memoryMb": 81920,
        "coresPercent": 100,
        "pools": {"worker": {"model": "NVIDIA A100 80GB", "nodes": 1, "cardsPerNode": 1}},
    }
    assert out["team-b"]["gpuInventory"] == {
        "model": "NVIDIA L4 24GB",
        "cards": 4,
        "memoryMb": 92136,
        "coresPercent": 400,
        "pools": {"worker": {"model": "NVIDIA L4 24GB", "nodes": 1, "cardsPerNode": 4}},
    }
    assert "secret" in out["managementKubeconfig"]


def test_workloads_are_created_after_hami_with_their_release_wait(rec):
    d = rec.named("team-a-default-shared-a100-deployment")
    assert d.inputs["spec"]["replicas"] == 3
    tmpl = d.inputs["spec"]["template"]
    assert tmpl["metadata"]["labels"] == {"gpu-tenancy/workload": "shared-a100", "gpu-tenancy/tenant": "team-a"}
    limits = tmpl["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}
    assert tmpl["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true"
    assert {
        "team-a-hami-webhook-probe",
        "team-a-hami-registration",
        "team-a-releaser-container",
        "team-a-quota-default",
    } <= deps(rec, "team-a-default-shared-a100-deployment")
    assert "team-a-hami-release" in deps(rec, "team-a-hami-webhook-probe")
    assert provider_name(d) == "team-a-cp-k8s"
    br = rec.named("team-a-default-shared-a100-bind-release")
    assert br.type == "pulumi-python:dynamic/gpu-tenancy:ReleaseWait"
    assert "team-a-default-shared-a100-deployment" in deps(rec, "team-a-default-shared-a100-bind-release")
    assert br.inputs["selector"] == "gpu-tenancy/workload=shared-a100" and br.inputs["count"] == 3
    assert "secret" in br.inputs["kubeconfig"]
    pod = rec.named("team-b-inference-inference-l4-pod")
    assert pod.inputs["metadata"]["annotations"]["nvidia.com/use-gputype"] == "L4"
    assert pod.inputs["metadata"]["namespace"] == "inference"
    assert "team-b-quota-inference" in deps(rec, "team-b-inference-inference-l4-pod")
    assert "team-b-quota-ns-inference" in deps(rec, "team-b-quota-inference")
    assert rec.named("team-b-inference-inference-l4-bind-release").inputs["pod_names"] == ["inference-l4"]


def test_one_gpu_budget_split_over_the_namespaces_never_multiplied(rec):
    q = rec.named("team-b-quota-inference").inputs
    assert q["metadata"] == {"name": "gpu-quota", "namespace": "inference"}
    # the inference-l4 pod's own use (8000 MB / 25 %, one vGPU) ...
    assert q["spec"]["hard"]["limits.nvidia.com/gpumem"] == "8000"
    assert q["spec"]["hard"]["requests.nvidia.com/gpucores"] == "25"
    # ... and default the rest of team-b's 40 vGPU / 92136 MB / 400 %
    d = rec.named("team-b-quota-default").inputs["spec"]["hard"]
    assert (d["limits.nvidia.com/gpu"], d["limits.nvidia.com/gpumem"], d["limits.nvidia.com/gpucores"]) == (
        "39",
        "84136",
        "375",
    )
    # team-a's budget, two cards' worth on one card (Pulumi.dev.yaml says why), all in default
    assert rec.named("team-a-quota-default").inputs["spec"]["hard"]["limits.nvidia.com/gpumem"] == "163840"
    # default exists in every cluster: labelled, not created; other GPU namespaces are created labelled
    assert rec.named("team-b-quota-ns-default").type == "kubernetes:core/v1:NamespacePatch"
    assert rec.named("team-b-quota-ns-inference").inputs["metadata"]["labels"] == {"gpu-tenancy/gpu-budget": "true"}
    # the budget's policy binds every namespace (a label alone opens no budget) and names the shares
    binding = rec.named("team-b-quota-policy-binding").inputs["spec"]
    assert "matchResources" not in binding
    budgeted = rec.named("team-b-quota-policy").inputs["spec"]["variables"][-1]["expression"]
    assert "namespaceObject.metadata.name in ['default', 'inference']" in budgeted


def test_adopted_management_cluster_creates_no_k3s():
    config = dict(DEV)
    config["gpu-tenancy:cluster"] = {**DEV["gpu-tenancy:cluster"], "mode": "kubeconfig"}
    config["gpu-tenancy:kubeconfig"] = "apiVersion: v1\nkind: Config\n"
    rec = run_program(config, secret_keys=("gpu-tenancy:kubeconfig",))
    types = {r.type for r in rec.registrations}
    assert "docker:index/container:Container" in types  # the workers still run in Docker
    assert not [r for r in rec.registrations if r.name.startswith("management-k3s")]
    assert rec.named("management-k8s").inputs["kubeconfig"] == {"secret": "apiVersion: v1\nkind: Config\n"}


def test_the_lab_node_image_runs_the_workers_and_brings_its_own_pod_network():
    """cluster.nodeImage: workers run `<repository>:<tenant version>`; no kindnet manifest is read
    or applied (the lab's image has its own network); NodeBootstrap lets nodes read the others."""
    config = dict(DEV)
    config["gpu-tenancy:cluster"] = {**DEV["gpu-tenancy:cluster"], "nodeImage": "gpu-tenancy/node"}
    lab = run_program(config)
    for team in ("team-a", "team-b"):
        assert lab.named(f"{team}-worker-0-image").inputs["name"] == "gpu-tenancy/node:v1.35.1"
        assert not [r for r in lab.registrations if r.name.startswith(f"{team}-network")]
        role = lab.named(f"{team}-bootstrap-node-network-role").inputs
        assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}]
        binding = lab.named(f"{team}-bootstrap-node-network").inputs
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}
        ]
    container = lab.named("team-a-worker-0-container").inputs
    assert container["stopSignal"] == "SIGRTMIN+3" and container["privileged"] is True


@pytest.mark.parametrize("team", ["team-a", "team-b"])
def test_release_controller_runs_with_the_lab_on_its_own_least_privilege_token(rec, team):
    image = rec.named("releaser-image").inputs
    assert (
        image["build"]["dockerfile"] == "components/controllers/release/Dockerfile" and image["build"]["context"] == "."
    )
    assert image["build"]["args"] == {"BASE_IMAGE": "docker.io/library/python:3.11-slim"}
    assert image["skipPush"] is True
    c = rec.named(f"{team}-releaser-container")
    assert c.inputs["name"] == f"gpu-lab-{team}-releaser"
    assert c.inputs["image"].startswith("sha256:")  # the built image's id: a rebuild replaces the container
    assert c.inputs["restart"] == "unless-stopped" and c.inputs["mustRun"] is True and c.inputs["wait"] is True
    assert c.inputs["networksAdvanced"] == [{"name": "gpu-lab"}]
    assert "envs" not in c.inputs  # nothing secret in the environment; its arguments name only the bare pods
    # team-b's `kind: Pod` workload is made again after a kubelet refuses it; team-a has none
    readmit = ["inference/inference-l4"] if team == "team-b" else []
    assert c.inputs.get("command", []) == [a for pod in readmit for a in ("--readmit", pod)]
    (upload,) = c.inputs["uploads"]
    assert upload["file"] == "/run/secrets/gpu-tenancy/kubeconfig" and upload["permissions"] == "0400"
    kubeconfig = upload["content"]["secret"]
    assert SA_TOKEN in kubeconfig and f"server: https://172.30.0.2:{31443 if team == 'team-a' else 31444}" in kubeconfig
    assert "super" not in kubeconfig and "CERT" not in kubeconfig  # not the admin's credentials
    assert AUTOMATION_TOKEN not in kubeconfig
    role = rec.named(f"{team}-releaser-role").inputs
    assert role["rules"] == [dict(r) for r in RBAC_RULES + (READMIT_RULES if readmit else ())]
    assert provider_name(rec.named(f"{team}-releaser-role")) == f"{team}-cp-k8s"
    created = rec.named(f"{team}-releaser-gpu-tenancy-releaser-readmit-create").inputs["spec"]["validations"][0]
    assert created["expression"].endswith(f"in {readmit}".replace('"', "'"))
    assert "releaser-image" in deps(rec, f"{team}-releaser-container")
    assert f"{team}-releaser-token" in deps(rec, f"{team}-releaser-container")
    # a bound token, renewed by the controller into a volume that outlives the container
    token = rec.named(f"{team}-releaser-token").inputs
    assert token["account"] == "gpu-tenancy-releaser" and token["seconds"] == 7 * 24 * 3600
    assert c.inputs["volumes"] == [
        {"volumeName": f"gpu-lab-{team}-releaser-tokens", "containerPath": "/var/lib/gpu-tenancy"}
    ]
    renewal = rec.named(f"{team}-releaser-renewal-role").inputs
    assert renewal["rules"] == self_renewal_rules("gpu-tenancy-releaser")
    assert rec.stack_outputs[team]["releaseController"] == {
        "container": f"gpu-lab-{team}-releaser",
        "metrics": f"docker exec gpu-lab-{team}-releaser python -m components.controllers.release.scrape",
    }


def test_registration_gate_waits_for_every_fake_card(rec):
    gate = rec.named("team-b-hami-registration")
    assert gate.type == "pulumi-python:dynamic/gpu-tenancy:HamiRegistration"
    assert gate.inputs["expected"] == {
        "gpu-lab-team-b-worker-0": [f"GPU-team-b-gpu-lab-team-b-worker-0-{i}" for i in range(4)]
    }
    assert "team-b-hami-release" in deps(rec, "team-b-hami-registration")
    assert "secret" in gate.inputs["kubeconfig"]


# Renamed types, new -> previous: a stack made before a rename is kept through its alias.
RENAMED = {
    "gpu-tenancy:index:ControlPlane": "gpu-tenancy:index:Tenant",
    "gpu-tenancy:index:ReleaseController": "gpu-tenancy:index:LockReleaser",
    "gpu-tenancy:index:ReleaseControllerImage": "gpu-tenancy:index:ReleaserImage",
    "pulumi-python:dynamic/gpu-tenancy:ReleaseWait": "pulumi-python:dynamic/gpu-tenancy:BindRelease",
}


@pytest.mark.parametrize("new, previous", RENAMED.items())
def test_a_renamed_resource_keeps_its_previous_type_as_an_alias(rec, new, previous):
    found = rec.of_type(new)
    assert found, f"nothing registered as {new}"
    assert all(previous in r.alias_types for r in found), [(r.name, r.alias_types) for r in found]
    assert not rec.of_type(previous)


@pytest.mark.parametrize(
    ("team", "port", "cidr"), [("team-a", 31443, "10.244.0.0/16"), ("team-b", 31444, "10.245.0.0/16")]
)
def test_each_tenant_runs_the_stacks_kube_proxy_which_sizes_no_host_setting(rec, team, port, cidr):
    """Kamaji's kube-proxy addon takes no configuration, and kubeadm's default writes the host-wide
    nf_conntrack_max, which a container worker may not: it crash-loops and Services do not route."""
    tcp = rec.named(f"{team}-cp-tcp").inputs
    assert "kubeProxy" not in tcp["spec"]["addons"]
    ds = rec.named(f"{team}-kube-proxy-daemonset")
    assert provider_name(ds) == f"{team}-cp-k8s"
    assert ds.inputs["metadata"]["name"] == "gpu-tenancy-kube-proxy"  # not Kamaji's: it removes its own
    pod = ds.inputs["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-proxy:v1.35.1"
    assert pod["hostNetwork"] is True and container["securityContext"] == {"privileged": True}
    assert pod["serviceAccountName"] == "gpu-tenancy-kube-proxy"
    data = rec.named(f"{team}-kube-proxy-config").inputs["data"]
    config = yaml.safe_load(data["config.conf"])
    assert config["conntrack"] == {"maxPerCore": 0} and config["mode"] == "iptables"
    assert config["clusterCIDR"] == cidr
    kubeconfig = yaml.safe_load(data["kubeconfig.conf"])
    assert kubeconfig["clusters"][0]["cluster"]["server"] == f"https://172.30.0.2:{port}"
    assert kubeconfig["users"][0]["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}
    binding = rec.named(f"{team}-kube-proxy-binding").inputs
    assert binding["roleRef"]["name"] == "system:node-proxier"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpu-tenancy-kube-proxy", "namespace": "kube-system"}
    ]
    # before the workers join (their first pods use Services), and before HAMi
    assert reaches(rec, f"{team}-hami-release", f"{team}-kube-proxy-daemonset")


@pytest.mark.parametrize("team", ["team-a", "team-b"])
def test_hamis_scheduler_rolls_on_a_one_node_tenant(rec, team):
    """The chart's scheduler pods may not share a node and roll with maxUnavailable 0: with one
    worker each later release change would wait forever for the old pod's node."""
    patch = rec.named(f"{team}-hami-scheduler-rollout")
    assert patch.type == "kubernetes:apps/v1:DeploymentPatch" and provider_name(patch) == f"{team}-cp-k8s"
    assert patch.inputs["metadata"] == {
        "name": "hami-scheduler",
        "namespace": "hami-system",
        "annotations": {"pulumi.com/patchForce": "true"},  # Helm's manager holds the defaults
    }
    assert patch.inputs["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0},
    }
    assert f"{team}-hami-release" in deps(rec, f"{team}-hami-scheduler-rollout")


def test_kamajis_datastore_goes_after_the_tenants_and_before_kamaji(rec):
    """Kamaji's finalizer holds its DataStore until Kamaji lets it go: deleted by the chart with
    Kamaji itself it never goes, and `destroy` waits forever."""
    teardown = rec.named("kamaji-datastore")
    assert teardown.type == "pulumi-python:dynamic/gpu-tenancy:DataStoreTeardown"
    assert teardown.inputs["name"] == "default"
    assert "kamaji-kamaji" in deps(rec, "kamaji-datastore")
    for team in ("team-a", "team-b"):
        assert reaches(rec, f"{team}-cp-tcp", "kamaji-datastore")
