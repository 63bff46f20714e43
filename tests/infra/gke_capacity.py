"""Platform rules for the optional GPU pools (flex-start with queued provisioning, Spot) and the Kueue objects that
use them, as data with their sources. tests/infra/test_kueue_capacity.py checks infra/ and k8s/components against
them. Each rule names where it was read and when; when a source changes, change the rule here, with the new date."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

READ = "2026-12-03"

GKE_QUEUED_DOC = "https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest"
GKE_SPOT_DOC = "https://cloud.google.com/kubernetes-engine/docs/concepts/spot-vms"
GKE_SPOT_HOWTO = "https://cloud.google.com/kubernetes-engine/docs/how-to/spot-vms"
CLUSTER_TOOLKIT_GUIDE = ("https://github.com/GoogleCloudPlatform/cluster-toolkit (docs: 'GKE Consumption Options User "
                         "Guide', section 'DWS Flex Start + Queued Provisioning')")
KUEUE_PROVREQ_DOC = ("https://kueue.sigs.k8s.io/docs/concepts/admission_check/provisioning_request/ (kubernetes-sigs/"
                     "kueue site/content/en/docs/concepts/admission_check/provisioning_request.md, main ff69552e79)")
KUEUE_CRDS = "tests/infra/crds/kueue (kubernetes-sigs/kueue b7ef59aa69, tests/infra/crds/README.md)"


@dataclass(frozen=True)
class Rule:
    what: str
    source: str
    read: str = READ


# --- the flex-start pool with queued provisioning (google_container_node_pool) ---------------------------------
# Attribute path in the node pool's HCL -> the value GKE requires: the gcloud flags of the how-to's node pool
# (--enable-queued-provisioning --flex-start --enable-autoscaling --num-nodes=0 --total-max-nodes N
#  --location-policy=ANY --reservation-affinity=none --no-enable-autorepair), in the provider's names.
QUEUED_POOL: dict[tuple[str, ...], Any] = {
    ("queued_provisioning", "enabled"): True,
    ("node_config", "flex_start"): True,
    ("initial_node_count",): 0,
    ("autoscaling", "total_min_node_count"): 0,
    ("autoscaling", "location_policy"): "ANY",
    ("node_config", "reservation_affinity", "consume_reservation_type"): "NO_RESERVATION",
    ("management", "auto_repair"): False,
}
QUEUED_POOL_RULE = Rule("a queued-provisioning pool: queued provisioning and flex-start on, autoscaling from 0 nodes "
                        "(location policy ANY), no reservation, auto-repair off", GKE_QUEUED_DOC)
# A fixed size contradicts nodes made per ProvisioningRequest (the how-to scales from --num-nodes=0).
QUEUED_POOL_FORBIDDEN = ("node_count",)

# --- taints and labels GKE puts on nodes ---------------------------------------------------------------------------
Taint = tuple[str, str, str]  # key, value, effect (Kubernetes spelling)
GPU_TAINT: Taint = ("nvidia.com/gpu", "present", "NoSchedule")
GPU_TAINT_RULE = Rule("GKE taints nodes with GPUs nvidia.com/gpu=present:NoSchedule",
                      "https://cloud.google.com/kubernetes-engine/docs/how-to/gpus")
QUEUED_TAINT: Taint = ("cloud.google.com/gke-queued", "true", "NoSchedule")
QUEUED_TAINT_RULE = Rule("GKE taints queued-provisioning nodes cloud.google.com/gke-queued=true:NoSchedule; workloads "
                         "need the toleration", CLUSTER_TOOLKIT_GUIDE)
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
NODEPOOL_LABEL_RULE = Rule("every GKE node carries cloud.google.com/gke-nodepool=<pool name>; the how-to's jobs select "
                           "the queued pool with it", GKE_QUEUED_DOC)
SPOT_LABEL = ("cloud.google.com/gke-spot", "true")
SPOT_TAINT: Taint = ("cloud.google.com/gke-spot", "true", "NoSchedule")
SPOT_RULE = Rule("GKE labels Spot nodes cloud.google.com/gke-spot=true; a Standard pool is tainted only if the pool "
                 "says so (the how-to's taint: cloud.google.com/gke-spot=true:NoSchedule)", GKE_SPOT_HOWTO)
SPOT_NOTICE_S = 30
SPOT_NOTICE_RULE = Rule("a Spot VM terminates 30 s after its termination notice; the kubelet's graceful node "
                        "shutdown terminates its pods in that time", GKE_SPOT_DOC)
TERRAFORM_EFFECT = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}

# --- Kueue ---------------------------------------------------------------------------------------------------------
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
PROVISIONING_RULE = Rule("the built-in provisioning admission check: an AdmissionCheck with this controllerName whose "
                         "parameters name a ProvisioningRequestConfig, referenced by the ClusterQueue",
                         KUEUE_PROVREQ_DOC)
QUEUED_CLASS = "queued-provisioning.gke.io"
QUEUED_CLASS_RULE = Rule("GKE's provisioning class for flex-start with queued provisioning", GKE_QUEUED_DOC)
# The ResourceFlavor rule Kueue applies at admission, as the CRD's own field descriptions state it (the test checks
# the description still says so): a podset gets a flavor only if it tolerates each of the flavor's nodeTaints, or the
# flavor's tolerations match that taint; the flavor's tolerations and nodeLabels are then added to the admitted pods.
FLAVOR_TAINT_PHRASES = (
    "must have tolerations for these nodeTaints in order to\nget assigned this ResourceFlavor",
    "When this ResourceFlavor has also set the matching tolerations (in .spec.tolerations),\n"
    "then the nodeTaints are not considered during admission.",
)
FLAVOR_TOLERATION_PHRASE = "tolerations are extra tolerations that will be added to the pods admitted"
FLAVOR_RULE = Rule("flavor assignment needs the podset to tolerate nodeTaints, unless the flavor tolerates them; "
                   "the flavor's tolerations are added to admitted pods", KUEUE_CRDS)
# Which engine Kueue queues (and so sends through an admission check) in its shipped default configuration: a
# ProvisioningRequest is made for a Workload, whatever its kind, but only a queued job has a Workload.
ENGINE_FRAMEWORK = {"tfjob": "kubeflow.org/tfjob", "jobset": "jobset.x-k8s.io/jobset"}
ENGINE_RULE = Rule("Kueue v0.19+ queues JobSets by default; TFJobs only with kubeflow.org/tfjob added back "
                   "(k8s/kueue-config), deprecated", KUEUE_CRDS + ", controller_manager_config.yaml")
