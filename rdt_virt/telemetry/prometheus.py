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

"""The agent's Prometheus endpoint.

A custom collector turns the latest host state document into metrics at
scrape time, so the endpoint serves exactly what the state file says:

Per instance (labels ``instance_uuid``, ``group`` and the project label;
``domain`` too with ``[rdt_agent] prometheus_instance_names``):

* ``rdt_virt_instance_memory_bandwidth_total_bytes_per_second``
* ``rdt_virt_instance_memory_bandwidth_local_bytes_per_second``
* ``rdt_virt_instance_llc_occupancy_bytes``
* ``rdt_virt_instance_monitored`` (1 when the instance has values now)
* ``rdt_virt_instance_policy`` (label ``setting``: ``mem_bw``,
  ``mem_bw_mbps``, ``cache_l3``, ...): what the host applies, in the
  extra spec's unit (percent, MBps, KiB), and
  ``rdt_virt_instance_policy_requested`` where the flavor asked for
  something else (``hw:mem_bw=15`` applied as 20 percent)

and on hosts with Intel's package telemetry (Linux 7.0), named like
Kepler's ``kepler_vm_cpu_watts``/``kepler_vm_cpu_joules_total`` for the
"core" zone they measure:

* ``rdt_virt_instance_cpu_core_watts`` (gauge)
* ``rdt_virt_instance_cpu_core_joules_total`` (counter, since the agent
  started)
* ``rdt_virt_instance_cpu_core_activity_farads_per_second`` (gauge)

Per host: the same three sums as ``rdt_virt_host_*`` (and
``rdt_virt_host_cpu_core_watts`` with telemetry), plus
``rdt_virt_host_rmids``, ``rdt_virt_host_rmids_used``,
``rdt_virt_host_closids``, ``rdt_virt_host_closids_used``,
``rdt_virt_host_instances``, ``rdt_virt_host_monitored_instances``,
``rdt_virt_host_monitoring_budget`` (the monitoring groups the RMIDs
allow), ``rdt_virt_host_monitoring_coverage_ratio`` (monitored instances
with values), ``rdt_virt_host_monitoring_group_coverage_ratio`` (those
needing a monitoring group that have one),
``rdt_virt_host_monitoring_rotating`` and
``rdt_virt_host_mba_supported`` (0 or 1; absent while resctrl is not
mounted); and the agent's own ``rdt_virt_agent_ticks_total``,
``rdt_virt_agent_writes_total``, ``rdt_virt_agent_errors_total``,
``rdt_virt_agent_write_failures_total`` (resctrl writes the kernel
refused, by ``error``: ``nospace``, ``busy``, ``notfound``,
``notmounted``, ``refused``), ``rdt_virt_agent_tick_cpu_seconds``,
``rdt_virt_agent_last_sample_timestamp_seconds`` (the state document's
``time``: a value that stops moving is an agent that stopped sampling,
while this endpoint, a thread of its own, still answers) and
``rdt_virt_agent_sample_interval_seconds``.

Protection (``hw:rdt_priority`` and the bandwidth controller):
``rdt_virt_instance_protection_class`` (1, with a ``class`` label),
``rdt_virt_instance_controller_level`` (the level the controller holds an
instance at, with a ``unit`` label: ``percent``, ``MBps`` or ``amd``;
absent while it is not held), ``rdt_virt_instance_controller_throttled``
(low-priority instances: 1 while held); per memory bandwidth domain
(``domain`` label) ``rdt_virt_domain_bandwidth_pressure_ratio``,
``rdt_virt_domain_memory_bandwidth_capacity_bytes_per_second`` (with a
``source`` label), ``rdt_virt_domain_throttled_instances``,
``rdt_virt_domain_active_high_instances``,
``rdt_virt_domain_starved_high_instances``,
``rdt_virt_domain_active_low_instances`` and
``rdt_virt_domain_low_instances_at_floor`` (active low instances that
cannot be throttled further); and per host
``rdt_virt_host_controller_high_watermark_ratio``, the pressure at which
the controller throttles.

Instances without a value are left out of a series rather than reported
as 0.

The project label (``project`` unless ``[rdt_agent]
prometheus_project_label`` says otherwise) holds the owning project's id
from the state file (Nova's ``<nova:owner>``) on every per-instance series,
the protection and controller ones included, so that Aetos, which lets a
non-admin user read only the series whose project label is the user's
project, shows tenants their own servers. It is empty for an instance
whose domain names no project (Prometheus treats an empty label as
absent). The host, domain and agent series carry none: they are the
operator's.

Exposure: the endpoint listens on loopback by default. Any other address
needs TLS (certificate and key; a client CA makes it mutual TLS), so that
metrics never leave the host in clear text and, with a client CA, only
the configured scrapers read them. Unless instance names are enabled, the
metrics name instances by UUID only: no ``domain`` label, and libvirt's
per-instance groups (named after the domain) are labelled ``libvirt``.
"""

import ipaddress
import socket

from rdt_virt import exception

_INSTANCE = (
    ('mbm_total_bps', 'rdt_virt_instance_memory_bandwidth_total_bytes_per_'
                      'second', 'Memory bandwidth to all memory (MBM total)'),
    ('mbm_local_bps', 'rdt_virt_instance_memory_bandwidth_local_bytes_per_'
                      'second', 'Memory bandwidth to local memory (MBM '
                                'local)'),
    ('llc_occupancy_bytes', 'rdt_virt_instance_llc_occupancy_bytes',
     'Last-level cache occupancy (CMT)'),
)
# Package telemetry (Intel AET); kept out of rdt_virt_instance_monitored.
_ENERGY = (
    ('power_watts', 'rdt_virt_instance_cpu_core_watts',
     'Power of the instance\'s CPU cores (package telemetry)', False),
    ('energy_joules', 'rdt_virt_instance_cpu_core_joules',
     'Energy of the instance\'s CPU cores since the agent started',
     True),
    ('activity_fps', 'rdt_virt_instance_cpu_core_activity_farads_per_'
                     'second', 'Work done per second by the instance\'s '
                               'cores, independent of frequency', False),
)
_HOST = (
    ('mbm_total_bps', 'rdt_virt_host_memory_bandwidth_total_bytes_per_'
                      'second', 'Memory bandwidth of the monitored '
                                'instances'),
    ('mbm_local_bps', 'rdt_virt_host_memory_bandwidth_local_bytes_per_'
                      'second', 'Local memory bandwidth of the monitored '
                                'instances'),
    ('llc_occupancy_bytes', 'rdt_virt_host_llc_occupancy_bytes',
     'LLC occupancy of the monitored instances'),
    ('power_watts', 'rdt_virt_host_cpu_core_watts',
     'Core power of the monitored instances (package telemetry)'),
    ('rmids_total', 'rdt_virt_host_rmids', 'RMIDs of the host'),
    ('rmids_used', 'rdt_virt_host_rmids_used', 'RMIDs in use'),
    ('closids_total', 'rdt_virt_host_closids', 'Usable CLOSIDs'),
    ('closids_used', 'rdt_virt_host_closids_used', 'CLOSIDs in use'),
    ('coverage', 'rdt_virt_host_monitoring_coverage_ratio',
     'Share of monitored instances with values'),
    ('rotating', 'rdt_virt_host_monitoring_rotating',
     '1 when monitoring groups are multiplexed for lack of RMIDs'),
    ('bandwidth_ceiling_bps', 'rdt_virt_host_memory_bandwidth_ceiling_'
                              'bytes_per_second',
     'Most the host\'s memory can move; no rate is published above it'),
    ('counter_resets', 'rdt_virt_host_mbm_counter_resets',
     'Readings dropped because a counter jumped above the ceiling'),
    ('mbm_counters_total', 'rdt_virt_host_mbm_counters',
     'MBM counters per domain (counter-assignment mode)'),
    ('mbm_counters_available', 'rdt_virt_host_mbm_counters_available',
     'Free MBM counters on the scarcest domain'),
    ('counter_coverage', 'rdt_virt_host_mbm_counter_coverage_ratio',
     'Share of the monitored instances that have MBM counters now'),
    ('instances', 'rdt_virt_host_instances', 'Nova instances on the host'),
    ('monitored', 'rdt_virt_host_monitored_instances',
     'Instances the agent monitors'),
    ('mon_budget', 'rdt_virt_host_monitoring_budget',
     'Monitoring groups the agent may keep (its RMID budget)'),
    ('mon_coverage', 'rdt_virt_host_monitoring_group_coverage_ratio',
     'Share of the instances needing a monitoring group that have one'),
    ('mba', 'rdt_virt_host_mba_supported',
     '1 when resctrl offers memory bandwidth allocation (MBA)'),
)
_DOMAIN = (
    ('pressure', 'rdt_virt_domain_bandwidth_pressure_ratio',
     'Measured bandwidth of a memory bandwidth domain over its capacity'),
    ('capacity_bps', 'rdt_virt_domain_memory_bandwidth_capacity_bytes_per_'
                     'second',
     'Capacity the controller assumes for the domain (source: configured, '
     'firmware or learned)'),
    ('throttled', 'rdt_virt_domain_throttled_instances',
     'Low-priority instances the controller holds down on the domain'),
    ('active_high', 'rdt_virt_domain_active_high_instances',
     'Active high-priority instances on the domain'),
    ('starved_high', 'rdt_virt_domain_starved_high_instances',
     'Active high-priority instances below half their peak while wanting '
     'as much'),
    ('active_low', 'rdt_virt_domain_active_low_instances',
     'Active low-priority instances on the domain'),
    ('low_at_floor', 'rdt_virt_domain_low_instances_at_floor',
     'Active low-priority instances the controller cannot throttle further'),
)
# The agent's own counters: (totals key, name without _total, help).
_AGENT = (
    ('ticks', 'rdt_virt_agent_ticks', 'Reconciliation ticks'),
    ('writes', 'rdt_virt_agent_writes', 'resctrl writes'),
    ('errors', 'rdt_virt_agent_errors', 'Unexpected errors'),
    ('events', 'rdt_virt_agent_events', 'libvirt events handled'),
)
LABELS = ['instance_uuid', 'group']
#: The label Aetos restricts tenants' queries on, by default
#: (``[rdt_agent] prometheus_project_label``).
PROJECT_LABEL = 'project'
# The suffix of a requested value in a state file policy (the agent's
# rdt_virt.agent.desired.REQUESTED; not imported, this module runs where
# only the state file is).
REQUESTED = '_requested'
NAME_LABELS = ['instance_uuid', 'domain', 'group']
# Labels some per-instance families add to those above.
EXTRA_LABELS = ('setting', 'class', 'unit')


def _number(value):
    return (not isinstance(value, bool) and isinstance(value, (int, float)))


def _add_policy(applied, requested, labels, policy):
    # The state file's policy: {key: applied, key_requested: asked}.
    for key, value in sorted((policy or {}).items()):
        if not _number(value):
            continue
        if key.endswith(REQUESTED):
            requested.add_metric(labels + [key[:-len(REQUESTED)]],
                                 float(value))
        else:
            applied.add_metric(labels + [key], float(value))


class StateCollector(object):
    """Collects metrics from ``get_doc()`` and ``get_totals()`` callables.

    :param get_doc: returns the latest state document, or None.
    :param get_totals: returns the agent's counters (``ticks``,
        ``writes``, ``errors``, ``tick_cpu``), or None.
    :param instance_names: add the ``domain`` label and name libvirt's
        groups.
    :param group_prefix: rdt-virt's group prefix (``[rdt] group_prefix``);
        other groups are libvirt's.
    :param project_label: name of the label holding each instance's
        project id (``[rdt_agent] prometheus_project_label``); None: no
        such label, as before the endpoint had one (for comparisons).
    :raises: InvalidConfig for a project label that another label of the
        per-instance series has already.
    """

    def __init__(self, get_doc, get_totals=None, instance_names=False,
                 group_prefix='rdtvirt-', project_label=PROJECT_LABEL):
        if project_label in NAME_LABELS + list(EXTRA_LABELS):
            raise exception.InvalidConfig(
                option='[rdt_agent] prometheus_project_label',
                value=project_label, reason='the endpoint uses this label '
                'for something else')
        self.get_doc = get_doc
        self.get_totals = get_totals
        self.instance_names = instance_names
        self.group_prefix = group_prefix
        self.label_names = (NAME_LABELS if instance_names else LABELS) + (
            [project_label] if project_label else [])
        self.project_label = project_label

    def _labels(self, uuid, inst):
        group = inst.get('group') or ''
        if self.instance_names:
            labels = [uuid, inst.get('name') or '', group]
        else:
            if group and not group.startswith(self.group_prefix):
                group = 'libvirt'
            labels = [uuid, group]
        if self.project_label:
            project = inst.get('project_id')
            # Empty: Prometheus reads it as no label, and Aetos shows the
            # series to no tenant.
            labels.append(project if isinstance(project, str) else '')
        return labels

    def describe(self):
        # Metrics depend on the document; let the registry call collect().
        return []

    def collect(self):
        from prometheus_client import core

        doc = self.get_doc() or {}
        label_names = self.label_names
        families = {}
        for field, name, doc_text in _INSTANCE:
            families[field] = core.GaugeMetricFamily(name, doc_text,
                                                     labels=label_names)
        monitored = core.GaugeMetricFamily(
            'rdt_virt_instance_monitored',
            '1 when the instance has monitoring values now',
            labels=label_names)
        applied = core.GaugeMetricFamily(
            'rdt_virt_instance_policy', 'RDT setting the host applies to '
            'the instance, in its extra spec\'s unit',
            labels=label_names + ['setting'])
        requested = core.GaugeMetricFamily(
            'rdt_virt_instance_policy_requested', 'What the flavor asked '
            'for, where the host applies another value',
            labels=label_names + ['setting'])
        for uuid, inst in sorted((doc.get('instances') or {}).items()):
            labels = self._labels(uuid, inst)
            has = False
            for field, family in families.items():
                value = inst.get(field)
                if value is not None:
                    family.add_metric(labels, float(value))
                    has = True
            monitored.add_metric(labels, 1.0 if has else 0.0)
            _add_policy(applied, requested, labels, inst.get('policy'))
        yield from families.values()
        yield monitored
        yield applied
        yield requested
        yield from self._energy(doc, label_names)
        yield from self._controller(doc, label_names)
        host = doc.get('host') or {}
        for field, name, doc_text in _HOST:
            value = host.get(field)
            if value is None:
                continue
            yield core.GaugeMetricFamily(name, doc_text, value=float(value))
        part = host.get('controller')
        if isinstance(part, dict) and _number(part.get('high_watermark')):
            yield core.GaugeMetricFamily(
                'rdt_virt_host_controller_high_watermark_ratio',
                'Pressure at or above which the controller throttles',
                value=float(part['high_watermark']))
        yield from self._sample_time(doc)
        totals = self.get_totals() if self.get_totals else None
        if totals:
            yield from self._totals(totals)

    @staticmethod
    def _sample_time(doc):
        from prometheus_client import core

        if _number(doc.get('time')):
            yield core.GaugeMetricFamily(
                'rdt_virt_agent_last_sample_timestamp_seconds',
                'When the agent took the sample served here (epoch '
                'seconds)', value=float(doc['time']))
        if _number(doc.get('interval')):
            yield core.GaugeMetricFamily(
                'rdt_virt_agent_sample_interval_seconds',
                'Seconds between the agent\'s samples',
                value=float(doc['interval']))

    @staticmethod
    def _totals(totals):
        from prometheus_client import core

        for key, name, text in _AGENT:
            if key in totals:
                yield core.CounterMetricFamily(name, text,
                                               value=float(totals[key]))
        failures = totals.get('write_failures')
        if isinstance(failures, dict):
            family = core.CounterMetricFamily(
                'rdt_virt_agent_write_failures',
                'resctrl writes the kernel refused, by error',
                labels=['error'])
            for code, count in sorted(failures.items()):
                family.add_metric([str(code)], float(count))
            yield family
        if 'tick_cpu' in totals:
            yield core.GaugeMetricFamily(
                'rdt_virt_agent_tick_cpu_seconds',
                'CPU time of the last tick', value=totals['tick_cpu'])

    def _energy(self, doc, label_names):
        from prometheus_client import core

        instances = sorted((doc.get('instances') or {}).items())
        if not any('power_watts' in inst for _u, inst in instances):
            return
        for field, name, doc_text, counter in _ENERGY:
            cls = (core.CounterMetricFamily if counter
                   else core.GaugeMetricFamily)
            family = cls(name, doc_text, labels=label_names)
            for uuid, inst in instances:
                value = inst.get(field)
                if value is not None:
                    family.add_metric(self._labels(uuid, inst),
                                      float(value))
            yield family

    def _controller(self, doc, label_names):
        """Protection classes, levels and the controller's domains."""
        from prometheus_client import core

        classes = core.GaugeMetricFamily(
            'rdt_virt_instance_protection_class',
            '1 for the instance\'s protection class (hw:rdt_priority)',
            labels=label_names + ['class'])
        levels = core.GaugeMetricFamily(
            'rdt_virt_instance_controller_level',
            'Memory bandwidth level the controller holds the instance at '
            '(the host\'s MBA unit)', labels=label_names + ['unit'])
        throttled = core.GaugeMetricFamily(
            'rdt_virt_instance_controller_throttled',
            '1 while the controller holds a low-priority instance below '
            'its static policy', labels=label_names)
        host = doc.get('host') or {}
        part = host.get('controller')
        part = part if isinstance(part, dict) else {}
        unit = part.get('unit') or ''
        for uuid, inst in sorted((doc.get('instances') or {}).items()):
            labels = self._labels(uuid, inst)
            priority = inst.get('priority') or 'normal'
            classes.add_metric(labels + [priority], 1.0)
            level = inst.get('level')
            if level is not None:
                levels.add_metric(labels + [unit], float(level))
            if priority == 'low':
                throttled.add_metric(labels,
                                     0.0 if level is None else 1.0)
        yield classes
        yield levels
        yield throttled
        domains = part.get('domains')
        if not isinstance(domains, dict):
            return
        families = []
        for field, name, text in _DOMAIN:
            families.append((field, core.GaugeMetricFamily(
                name, text, labels=['domain'] + (
                    ['source'] if field == 'capacity_bps' else []))))
        for dom, entry in sorted(domains.items()):
            if not isinstance(entry, dict):
                continue
            for field, family in families:
                value = entry.get(field)
                if isinstance(value, bool) or not isinstance(
                        value, (int, float)):
                    continue
                labels = [str(dom)]
                if field == 'capacity_bps':
                    labels.append(entry.get('capacity_source') or '')
                family.add_metric(labels, float(value))
        for _field, family in families:
            yield family


def registry_for(get_doc, get_totals=None, instance_names=False,
                 group_prefix='rdtvirt-', project_label=PROJECT_LABEL):
    """A CollectorRegistry holding only rdt-virt's collector."""
    from prometheus_client import core

    registry = core.CollectorRegistry(auto_describe=False)
    registry.register(StateCollector(get_doc, get_totals, instance_names,
                                     group_prefix, project_label))
    return registry


def is_loopback(host):
    """True if every address ``host`` stands for is a loopback address."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    if not host:
        return False    # "" binds every interface
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(info[4][0].split('%')[0]).is_loopback
        for info in infos)


def serve(host, port, get_doc, get_totals=None, instance_names=False,
          group_prefix='rdtvirt-', certfile=None, keyfile=None,
          client_cafile=None, project_label=PROJECT_LABEL):
    """Start the endpoint in a daemon thread; returns the server.

    :raises: InvalidConfig for a non-loopback ``host`` without TLS, or a
        project label the endpoint uses for something else.
    """
    import prometheus_client

    if not is_loopback(host) and not (certfile and keyfile):
        raise exception.InvalidConfig(
            option='[rdt_agent] prometheus_host', value=host,
            reason='an address other than loopback needs '
                   'prometheus_tls_cert and prometheus_tls_key')
    registry = registry_for(get_doc, get_totals, instance_names,
                            group_prefix, project_label)
    tls = {}
    if certfile and keyfile:
        tls = {'certfile': certfile, 'keyfile': keyfile}
        if client_cafile:
            tls.update(client_cafile=client_cafile,
                       client_auth_required=True)
    started = prometheus_client.start_http_server(port, addr=host,
                                                  registry=registry, **tls)
    # prometheus-client >= 0.17 returns (server, thread).
    return started[0] if isinstance(started, tuple) else started
