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

"""What rdt_noisy_neighbor asks Prometheus and Aetos.

Watcher's Prometheus datasource (Watcher 14, 2025.1) and its Aetos
datasource (Watcher 15, 2025.2: Prometheus behind Keystone, service type
``metric-storage``) answer ``statistic_aggregation`` only for the metrics
of their own map, and none of them is rdt-virt's. The strategy asks
through the datasource's own client instead (python-observabilityclient's
``PrometheusAPIClient``, the helper's ``prometheus``, which Watcher
builds from ``[prometheus_client]`` or from Keystone's catalog), with
instant PromQL queries over the audit's ``period`` ending now, on the
series of rdt-virt-agent's endpoint (``rdt_virt.telemetry.prometheus``).

Instances are matched by the agent's own label, ``instance_uuid`` (the
audit parameter ``instance_label``), not by Watcher's
``instance_uuid_label``: that one names the label of Ceilometer's
exporter (``resource``) that Watcher's own strategies read, and the two
exporters label instances differently. One instance may have several
series over a window (a new one when it moves to another host, or to
another of the agent's groups), so a mean is taken over all their
samples, as Gnocchi's is over all its points::

    sum(sum_over_time(M{instance_uuid="U"}[Ps]))
      / sum(count_over_time(M{instance_uuid="U"}[Ps]))

The level: first whether the controller held the instance all through
the window::

    min(min_over_time(rdt_virt_instance_controller_throttled{...}[Ps]))

No series: the agent does not control the instance (as Gnocchi without
``memory.bandwidth.limit``). 0: it was let go during the window, which the
decision reads as a level above any floor (the host loop can still
throttle it; Gnocchi's mean would include its cap or the maximum). 1: the
mean of ``rdt_virt_instance_controller_level``, as above.

Hosts are matched by Watcher's host label (``[prometheus_client]`` or
``[aetos_client] fqdn_label``, ``fqdn`` by default), resolved from the
hypervisor hostname as Watcher resolves it (the label's value, or its
part before the first dot), and the pressure is the most pressed memory
bandwidth domain's mean::

    max by (domain) (avg_over_time(
        rdt_virt_domain_bandwidth_pressure_ratio{fqdn="F"}[Ps]))
"""

import datetime
import math

from oslo_log import log

from watcher_plugin import compat
from watcher_plugin import meters

LOG = log.getLogger(__name__)

INSTANCE_LABEL = 'instance_uuid'
BANDWIDTH = 'rdt_virt_instance_memory_bandwidth_total_bytes_per_second'
LEVEL = 'rdt_virt_instance_controller_level'
THROTTLED = 'rdt_virt_instance_controller_throttled'
PRESSURE = 'rdt_virt_domain_bandwidth_pressure_ratio'


def quote(value):
    """``value`` as a PromQL string literal."""
    return '"%s"' % str(value).replace('\\', '\\\\').replace(
        '"', '\\"').replace('\n', '\\n')


def selector(metric, label, value):
    return '%s{%s=%s}' % (metric, label, quote(value))


def duration(period):
    """A PromQL range of whole seconds, at least one."""
    return '%ds' % max(1, int(math.ceil(float(period))))


def mean(metric, label, value, period):
    """The mean of every sample of the matching series in the window."""
    args = {'sel': selector(metric, label, value), 'range': duration(period)}
    return ('sum(sum_over_time(%(sel)s[%(range)s])) / '
            'sum(count_over_time(%(sel)s[%(range)s]))' % args)


def lowest(metric, label, value, period):
    return 'min(min_over_time(%s[%s]))' % (
        selector(metric, label, value), duration(period))


def by_domain(metric, label, value, period):
    return 'max by (domain) (avg_over_time(%s[%s]))' % (
        selector(metric, label, value), duration(period))


class PromQLMeters(object):
    """Watcher's Prometheus or Aetos helper, asked in PromQL."""

    METRIC_MAP = {meters.BANDWIDTH: BANDWIDTH, meters.LIMIT: LEVEL,
                  meters.THROTTLED: THROTTLED, meters.PRESSURE: PRESSURE}
    METRICS = (meters.BANDWIDTH, meters.LIMIT, meters.THROTTLED,
               meters.PRESSURE)
    HAS_PRESSURE = True

    def __init__(self, helper, instance_label=INSTANCE_LABEL):
        self.helper = helper
        self.NAME = helper.NAME
        self.client = helper.prometheus
        self.instance_label = instance_label or INSTANCE_LABEL
        self.host_label = compat.host_label_name(helper)

    def list_metrics(self):
        return self.helper.list_metrics()

    def check_availability(self):
        return self.helper.check_availability()

    def span(self, win):
        return (win.now - datetime.timedelta(seconds=float(win.period)),
                win.now)

    def needs(self, fact, win):
        where = {
            'prometheus': "the Prometheus server of watcher.conf's "
                          "[prometheus_client]",
            'aetos': "the Prometheus behind Aetos (Keystone service type "
                     "metric-storage), read by Watcher's user with the "
                     "admin role (Aetos restricts other users to their "
                     "project's series, and the agent's have no project "
                     "label)",
        }.get(self.NAME, self.NAME)
        return ('%(metric)s samples labelled %(label)s=<the instance\'s '
                'uuid> in the last %(period)s (the audit parameters period '
                'and instance_label): rdt-virt-agent\'s endpoint '
                '([rdt_agent] prometheus_port) scraped by %(where)s' % {
                    'metric': self.METRIC_MAP.get(fact, fact),
                    'label': self.instance_label,
                    'period': duration(win.period), 'where': where})

    def bandwidth(self, instance, win):
        return self._one(mean(BANDWIDTH, self.instance_label, instance.uuid,
                              win.period))

    def level(self, instance, win, metric=None):
        """The controller's mean level over the window.

        ``metric`` (the Gnocchi meter of ``level_metric``) is not used:
        the agent's series have fixed names.
        """
        held = self._one(lowest(THROTTLED, self.instance_label,
                                instance.uuid, win.period))
        if held.value is None:
            return held
        if held.value < 1:
            # Let go during the window: the host loop can throttle again.
            return meters.measured(math.inf)
        level = self._one(mean(LEVEL, self.instance_label, instance.uuid,
                               win.period))
        if level.value is None and not level.failed:
            return meters.failed('%s: held all through the window but no '
                                 'level' % level.missing)
        return level

    def pressure(self, node, win):
        value = compat.host_label_value(self.helper, node.hostname)
        if not value:
            return meters.failed(
                'no active %s target has %s=%s or %s=%s.<domain> (the scrape '
                'job of rdt-virt-agent must set the label to the host\'s '
                'name)' % (self.NAME, self.host_label, node.hostname,
                           self.host_label, node.hostname))
        query = by_domain(PRESSURE, self.host_label, value, win.period)
        result = self._query(query)
        if isinstance(result, meters.Reading):
            return result
        domains = {}
        for sample in result:
            number = _number(sample.value)
            if number is not None:
                domains[sample.labels.get('domain', '')] = number
        if not domains:
            return meters.absent('%s: no sample' % query)
        LOG.info('%s: pressure by memory bandwidth domain %s', node.hostname,
                 ', '.join('%s: %.3f' % kv for kv in sorted(domains.items())))
        return meters.measured(max(domains.values()))

    def _query(self, query):
        """The query's samples, or a failed Reading."""
        try:
            return self.client.query(query)
        except Exception as e:
            return meters.failed('%s: %s' % (query, e))

    def _one(self, query):
        result = self._query(query)
        if isinstance(result, meters.Reading):
            return result
        values = [_number(sample.value) for sample in result]
        values = [v for v in values if v is not None]
        if not values:
            return meters.absent('%s: no sample' % query)
        return meters.measured(values[0])


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value
