# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""The ``[rdt_agent]`` group: how rdt-virt-agent runs on a compute host.

The agent also reads ``[rdt]`` (resctrl root, group prefix, strategy,
default group ways, state file), which it shares with nova-compute.
"""

import copy

from oslo_config import cfg

from rdt_virt.i18n import _

# Labels of the agent's per-instance series
# (rdt_virt.telemetry.prometheus) and those Prometheus gives every target:
# the project label may take none of these names.
TAKEN_LABELS = ('instance_uuid', 'domain', 'group', 'setting', 'class',
                'unit', 'instance', 'job')
# A Prometheus label name (not reserved: no leading "__"), not taken.
PROJECT_LABEL_REGEX = r'\A(?!__)(?!(?:%s)\Z)[a-zA-Z_][a-zA-Z0-9_]*\Z' % (
    '|'.join(TAKEN_LABELS))

agent_group = cfg.OptGroup(
    'rdt_agent',
    title=_('rdt-virt-agent options'),
    help=_('The host agent that keeps instance threads in their resctrl '
           'groups, owns the shared and monitoring groups and samples the '
           'monitoring counters.'))

agent_opts = [
    cfg.StrOpt(
        'libvirt_uri',
        default='qemu:///system',
        help=_("""
libvirt connection URI of the hypervisor whose domains the agent manages.

Possible values:

* Any libvirt URI, e.g. ``qemu:///system`` or
  ``qemu:///system?socket=/path/to/libvirt-sock`` for a libvirtd with its
  own socket (the emulated host of the functional tests).
""")),
    cfg.FloatOpt(
        'tick_interval',
        default=10.0,
        min=0.1,
        help=_("""
Seconds between two full reconciliations.

A full reconciliation repairs drift that no libvirt event announces: a
resctrl remount, deleted groups, moved threads, hot-plugged vCPUs. Domain
start and stop events are handled at once, between ticks. A tick on a
converged host reads resctrl and /proc and writes nothing.
""")),
    cfg.FloatOpt(
        'sample_interval',
        default=10.0,
        min=0.1,
        help=_("""
Seconds between two readings of the monitoring counters.

Rates are computed over this interval and published to the state file
(``[rdt] state_file``) and the Prometheus endpoint after each reading.
""")),
    cfg.IntOpt(
        'rmid_budget',
        default=-1,
        min=-1,
        help=_("""
Most monitoring groups the agent keeps at once.

Every control group needs an RMID too, and creating one fails without a
free RMID, so the agent never uses more than ``num_rmids - num_closids``
RMIDs (less those of other tools' monitoring groups) for monitoring groups,
``num_rmids`` being the smallest monitoring resource's (with Intel's
package telemetry, ``PERF_PKG_MON``'s). On Arm MPAM each control group
has its own pool of PMGs, and holds at most that many less one.
When more instances need a monitoring group than the budget allows, the
agent rotates them (see ``rotation_interval``) and publishes the coverage.

Possible values:

* -1: automatic, the largest budget that leaves room for control groups.
* 0: never create monitoring groups (instances in a group of their own are
  still monitored through that group).
* N > 0: at most N, and never more than the automatic budget.
""")),
    cfg.FloatOpt(
        'rotation_interval',
        default=60.0,
        min=1.0,
        help=_("""
Seconds between two rotations of the monitoring groups.

Only used when monitored instances outnumber the RMID budget: every
interval, a quarter of the budget (at least one) is handed from the
instances monitored longest to those waiting longest. Each newly monitored
instance needs two counter readings before it has a rate, so this should be
several times ``sample_interval``.

Related options:

* ``rmid_budget``, ``sample_interval``
""")),
    cfg.FloatOpt(
        'retry_interval',
        default=30.0,
        min=0.0,
        help=_("""
Seconds to wait before creating a group again after the kernel refused it
for lack of a CLOSID or RMID (ENOSPC) or because RMIDs were still in limbo
(EBUSY). These are warnings, never errors that stop the agent.
""")),
    cfg.FloatOpt(
        'memory_bandwidth_ceiling',
        default=0.0,
        min=0.0,
        help=_("""
Most memory bandwidth of the whole host, in GB/s (10^9 bytes per second).

A counter that grows faster than this is taken for a hardware reset (AMD
hosts without counter assignment reset the counters of RMIDs they stop
tracking, and the kernel shows the reset as a jump of petabytes): that
interval has no rate, and no published rate ever exceeds this value.

Possible values:

* 0: automatic, 1.5 times the peak of the installed memory from SMBIOS
  (readable by root), else 1000 GB/s per L3 monitoring domain.
* Any positive number: this ceiling.
""")),
    cfg.BoolOpt(
        'place_extra_threads',
        default=False,
        help=_("""
Also place the other threads of each instance's QEMU process (the emulator
thread, I/O threads, vhost workers) in the instance's control and
monitoring groups.

libvirt only places vCPU threads. With this option memory bandwidth
throttling and monitoring cover the whole VM, including its I/O, at the
cost of a few more task writes when a domain starts. Threads join the
group of the instance's lowest vCPU.
""")),
    cfg.StrOpt(
        'proc_root',
        default='/proc',
        help=_("""
Where the procfs of the host is mounted. The agent finds QEMU processes and
their threads (``<proc_root>/<pid>/task/<tid>/comm``) there. Change it only
for tests.
""")),
    cfg.StrOpt(
        'qemu_pid_dir',
        default='/run/libvirt/qemu',
        help=_("""
Directory where libvirtd writes ``<domain name>.pid`` for each running QEMU
domain. The agent finds QEMU processes there first and falls back to
scanning ``proc_root`` for the domain's uuid.

Possible values:

* A directory, e.g. ``/proc/<pid>/root/run/libvirt/qemu`` for a libvirtd
  running in another mount namespace.
""")),
    cfg.FloatOpt(
        'domain_refresh_interval',
        default=300.0,
        min=1.0,
        help=_("""
Seconds after which the agent reads a domain's XML again even if libvirt
announced no change (start, stop, metadata change and device events always
refresh it at once).
""")),
    cfg.FloatOpt(
        'reconnect_interval',
        default=5.0,
        min=0.1,
        help=_("""
Seconds between attempts to reconnect to libvirtd after the connection was
lost (for example when libvirtd restarts).
""")),
    cfg.HostAddressOpt(
        'prometheus_host',
        default='127.0.0.1',
        help=_("""
Address the Prometheus endpoint listens on. The default serves only local
scrapers (for example a node exporter's or an agent's local scrape). Any
other address, all interfaces included, needs TLS: the agent refuses to
serve the metrics in clear text beyond loopback.

Related options:

* ``prometheus_tls_cert``, ``prometheus_tls_key``,
  ``prometheus_tls_client_ca``
""")),
    cfg.PortOpt(
        'prometheus_port',
        default=9543,
        help=_("""
TCP port of the Prometheus endpoint; 0 disables it.

Related options:

* ``prometheus_host``
""")),
    cfg.StrOpt(
        'prometheus_tls_cert',
        help=_("""
PEM certificate (chain) of the Prometheus endpoint. With
``prometheus_tls_key`` it makes the endpoint serve HTTPS, which any
``prometheus_host`` other than a loopback address requires.
""")),
    cfg.StrOpt(
        'prometheus_tls_key',
        help=_("""
PEM private key of ``prometheus_tls_cert``.
""")),
    cfg.StrOpt(
        'prometheus_tls_client_ca',
        help=_("""
PEM bundle of the certificate authorities whose client certificates may
scrape the endpoint. When set, a scraper must present one (mutual TLS);
when unset, any client that reaches the address may scrape.
""")),
    cfg.BoolOpt(
        'prometheus_instance_names',
        default=False,
        help=_("""
Label the per-instance metrics with the libvirt domain name (``domain``
label) and the name of libvirt's per-instance group. Off by default: the
metrics name an instance only by its UUID, and libvirt's groups (whose
names contain the domain name) appear as ``group="libvirt"``.
""")),
    cfg.StrOpt(
        'prometheus_project_label',
        default='project',
        regex=PROJECT_LABEL_REGEX,
        help=_("""
Name of the label that carries the owning project's id on every
per-instance series of the Prometheus endpoint.

Aetos, the Keystone-authenticated proxy in front of Prometheus, lets a
non-admin user query only the series whose label named by its
``[prometheus] project_label_name`` (default ``project``) holds the user's
project id. Give both options the same name so that tenants see their own
servers' series through Aetos. The value is the project id that Nova
writes into the domain's metadata (``<nova:owner><nova:project uuid>``).
An instance whose metadata names no project gets an empty value, which
Prometheus treats as no label at all: only admins see its series.
Host-wide series (``rdt_virt_host_*``, ``rdt_virt_domain_*``,
``rdt_virt_agent_*``) carry no project.

Possible values:

* A Prometheus label name: letters, digits and ``_``, not starting with a
  digit or with ``__``; not a label the endpoint uses already
  (``instance_uuid``, ``domain``, ``group``, ``setting``, ``class``,
  ``unit``), nor one Prometheus sets on every target it scrapes
  (``instance``, ``job``: it would rename ours ``exported_<name>``).
  The agent refuses any other value and serves no metrics.

Related options:

* ``prometheus_port``
""")),
    cfg.BoolOpt(
        'controller_enabled',
        default=True,
        help=_("""
Run the bandwidth controller, which throttles low-priority instances
(``hw:rdt_priority=low``) while a high-priority instance is active on a
memory bandwidth domain under pressure, and releases them afterwards.

When off, low-priority instances stay at their static policy and levels
left by an earlier run are dropped at the next tick. Instances of the
``normal`` class are never touched either way.

Related options: every ``controller_*`` option.
""")),
    cfg.FloatOpt(
        'controller_period',
        min=0.1,
        help=_("""
Seconds between two decisions of the bandwidth controller.

Unset: the sampling period (``sample_interval``); the controller then
decides on every sample. A longer period decides on the first sample after
it has passed, always on the rates of that sample's interval.
""")),
    cfg.FloatOpt(
        'controller_high_watermark',
        default=0.85,
        min=0.05,
        max=1.0,
        help=_("""
Pressure (a domain's measured bandwidth over its capacity) at or above
which the controller throttles the active low-priority instances of the
domain, if a high-priority instance is active there.

Lower: protects earlier and costs best-effort throughput more often.
Must be above ``controller_low_watermark``; the gap is the hysteresis.
""")),
    cfg.FloatOpt(
        'controller_low_watermark',
        default=0.60,
        min=0.0,
        max=1.0,
        help=_("""
Pressure at or below which the controller releases throttled instances in
steps (it also releases when no high-priority instance is active).

Between the two watermarks nothing changes. A band narrower than what
one throttle step removes makes the controller oscillate.
""")),
    cfg.FloatOpt(
        'controller_decrease',
        default=0.5,
        min=0.1,
        max=0.95,
        help=_("""
Multiplicative decrease: a throttled instance's level is multiplied by
this factor per step (0.5 halves it), rounded down to the host's MBA
granularity, never below ``controller_floor``.
""")),
    cfg.FloatOpt(
        'controller_increase',
        default=10.0,
        min=1.0,
        max=100.0,
        help=_("""
Additive increase: percent of the unthrottled value given back per release
step (on ``mba_MBps`` hosts: percent of the domain's capacity).
""")),
    cfg.FloatOpt(
        'controller_floor',
        default=10.0,
        min=0.0,
        max=100.0,
        help=_("""
The lowest level the controller sets, in percent of the unthrottled value
(on ``mba_MBps`` hosts: of the domain's capacity). The host's own minimum
(``info/MB/min_bandwidth``) applies when it is higher.
""")),
    cfg.FloatOpt(
        'controller_throttle_dwell',
        min=0.0,
        help=_("""
Seconds after a domain's last level change before it may throttle again.

Unset: one controller period, the time it takes to measure the effect of
the last step.
""")),
    cfg.FloatOpt(
        'controller_release_dwell',
        min=0.0,
        help=_("""
Seconds after a domain's last level change before it may release.

Unset: three controller periods. Longer: fewer changes when demand
fluctuates, slower return of bandwidth to best-effort instances.
""")),
    cfg.FloatOpt(
        'controller_active_threshold',
        default=50.0,
        min=0.0,
        help=_("""
MiB/s of memory bandwidth on a domain above which an instance counts as
active there. An idle high-priority instance does not hold its neighbours
down.
""")),
    cfg.FloatOpt(
        'memory_bandwidth_capacity',
        default=0.0,
        min=0.0,
        help=_("""
GB/s (10^9 bytes) that one memory bandwidth pool can move, for the
controller's pressure (see ``controller_pools``: on a host whose every L3
domain has memory of its own, a pool is one domain).

0: learned, as the highest total bandwidth that the pool sustained for
``controller_learn_samples`` samples in a row. Linux exposes no firmware
figure per L3 domain (ACPI HMAT bandwidths are per NUMA node), so set this
from a measurement (for example STREAM on an idle host, per socket) for
the controller to act before the pool has ever been saturated.
""")),
    cfg.StrOpt(
        'controller_pools',
        default='numa',
        choices=[
            ('numa', _('L3 domains that share a NUMA node (its memory '
                       'controllers) form one pool, read from libvirt\'s '
                       'host capabilities.')),
            ('domain', _('Every L3 domain is a pool of its own.')),
        ],
        help=_("""
What the controller treats as one memory bandwidth bottleneck: it sums the
pressure and throttles the low-priority instances over a pool.

``numa`` follows the memory: a two-socket host without Sub-NUMA Clustering
gets one pool per socket (its L3 domain), an AMD host with one NUMA node
per socket gets one pool for all of that socket's CCXs, which draw on the
same memory channels. ``domain`` controls each L3 domain on its own even
where they share memory; until libvirt's capabilities have been read, and
where they give no NUMA topology, that is what the controller does.
""")),
    cfg.IntOpt(
        'controller_learn_samples',
        default=3,
        min=1,
        help=_("""
Samples in a row a domain's total must hold for the learned capacity to
rise to it: a short burst does not count.
""")),
]


def register_opts(conf):
    conf.register_group(agent_group)
    conf.register_opts(agent_opts, group=agent_group)


# oslo.privsep registers these itself when the context is created; they are
# listed here for the sample configuration.
privsep_group = cfg.OptGroup(
    'rdt_virt_privsep',
    title=_('rdt-virt privileged daemon'),
    help=_('oslo.privsep options of the daemon that makes rdt-virt-agent\'s '
           'resctrl writes (rdt_virt.privsep.sys_admin_pctxt).'))


def list_opts():
    # Imported here: oslo.privsep pulls in eventlet, which commands that
    # only read configuration do not need.
    from oslo_privsep import priv_context

    return {agent_group: agent_opts,
            privsep_group: copy.deepcopy(priv_context.OPTS)}
