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

"""What rdt_noisy_neighbor reads, and what it reads from Gnocchi.

The strategy reads three facts, whatever the datasource:

* each high or low instance's memory bandwidth (:data:`BANDWIDTH`);
* each low instance's level, the memory bandwidth allocation the agent's
  controller holds it at (:data:`LIMIT`; in Prometheus with
  :data:`THROTTLED`, whether it was held at all);
* each host's memory bandwidth pressure (:data:`PRESSURE`), which only
  the agent's Prometheus endpoint publishes.

Each datasource's reader (:class:`Meters` here, for Gnocchi;
:class:`watcher_plugin.promql.PromQLMeters` for Prometheus and Aetos)
answers each of them with a :class:`Reading`, and names them in its
``METRIC_MAP`` as the datasource knows them, for ``openstack optimize
strategy state``.

Gnocchi stamps each aggregated point with the start of its interval
(``granularity`` seconds) and returns the points whose stamp lies in
``[start, stop)``. A window that starts ``period`` seconds ago in the
middle of an interval would leave out the point that covers its first
seconds, and a ``period`` shorter than the granularity could fall between
two stamps and read nothing at all. :func:`window` therefore starts the
window at the stamp of the interval that holds ``now - period`` and is
never shorter than one granularity.

:class:`Meters` is the Gnocchi helper, with the strategy's own meters as
its metric map, so that ``openstack optimize strategy state
rdt_noisy_neighbor`` lists the meters the strategy reads
(``memory.bandwidth.total``, ``memory.bandwidth.limit``) rather than the
upstream strategy's ``cpu_l3_cache``.
"""

import collections
import datetime
import math

BANDWIDTH = 'memory.bandwidth.total'
LIMIT = 'memory.bandwidth.limit'
METERS = (BANDWIDTH, LIMIT)
# Facts that Gnocchi does not hold (no meter of Ceilometer's carries them):
# their keys in the metric maps of the Prometheus readers.
THROTTLED = 'controller.throttled'
PRESSURE = 'domain.pressure'

Window = collections.namedtuple('Window', 'now period granularity refresh')
Window.__doc__ = """What the audit asks to average.

:param now: a naive UTC datetime, the end of the window.
:param period: seconds of measures (audit parameter ``period``).
:param granularity: seconds per Gnocchi point (``granularity``).
:param refresh: have Gnocchi aggregate first (``refresh``).
"""

Reading = collections.namedtuple('Reading', 'value missing failed')
Reading.__doc__ = """One fact as a datasource answered it.

:param value: the number, or None.
:param missing: without a value, what the datasource answered instead.
:param failed: True when the datasource could not be asked (an error,
    not an answer without data): the fact is unknown, not absent.
"""


def measured(value):
    return Reading(value, None, False)


def absent(why):
    """No series or no point: the datasource has nothing to say."""
    return Reading(None, why, False)


def failed(why):
    """The datasource could not answer."""
    return Reading(None, why, True)


def window(now, period, granularity):
    """(start, stop) of the measures that cover the last ``period`` s.

    :param now: a naive UTC datetime.
    """
    granularity = float(granularity)
    period = max(float(period), granularity)
    epoch = datetime.datetime(1970, 1, 1)
    begin = (now - epoch).total_seconds() - period
    begin = math.floor(begin / granularity) * granularity
    return epoch + datetime.timedelta(seconds=begin), now


def needs(metric, period, granularity):
    """What a window of measures needs, for the error without any."""
    return ('%(metric)s points at a granularity of %(gran)g s in its '
            'Gnocchi archive policy (the audit parameter granularity), '
            'Ceilometer polling the meter at least that often, and points '
            'aggregated in the last %(period)g s (the audit parameter '
            'period; refresh=true aggregates what Gnocchi has not yet)' % {
                'metric': metric, 'gran': float(granularity),
                'period': max(float(period), float(granularity))})


def _not_found(error):
    """True when Gnocchi says the metric or resource does not exist."""
    try:
        from gnocchiclient import exceptions as gnocchi_exc
    except ImportError:  # pragma: no cover - a dependency of Watcher
        return False
    return isinstance(error, gnocchi_exc.NotFound)


class Meters(object):
    """Watcher's Gnocchi helper, presenting the strategy's meters."""

    NAME = 'gnocchi'
    METRIC_MAP = {meter: meter for meter in METERS}
    # What "strategy state" lists (StrategyEndpoint._collect_metrics).
    METRICS = METERS
    # Gnocchi holds no pressure: the decision goes without it.
    HAS_PRESSURE = False

    def __init__(self, helper):
        self.helper = helper
        self.gnocchi = helper.gnocchi

    def list_metrics(self):
        return self.helper.list_metrics()

    def check_availability(self):
        return self.helper.check_availability()

    def __getattr__(self, name):
        return getattr(self.helper, name)

    def span(self, win):
        return window(win.now, win.period, win.granularity)

    def needs(self, fact, win):
        return needs(self.METRIC_MAP.get(fact, fact), win.period,
                     win.granularity)

    def bandwidth(self, instance, win):
        return self._mean(BANDWIDTH, instance, win)

    def level(self, instance, win, metric=LIMIT):
        """The mean of the level meter over the window.

        A meter Gnocchi does not have is a low instance that the agent
        does not control (absent); any other error leaves the level
        unknown (failed).
        """
        return self._mean(metric, instance, win)

    def pressure(self, node, win):
        return absent('Gnocchi holds no memory bandwidth pressure')

    def _mean(self, metric, instance, win):
        start, stop = self.span(win)
        kwargs = dict(metric=metric, resource_id=instance.uuid, start=start,
                      stop=stop, granularity=win.granularity,
                      aggregation='mean')
        if win.refresh:
            kwargs['refresh'] = True
        try:
            points = self.gnocchi.metric.get_measures(**kwargs)
        except Exception as e:
            # No such metric or resource (absent), or a granularity the
            # archive policy does not keep, or Gnocchi unreachable (failed).
            why = '%s of %s: %s' % (metric, instance.uuid, e)
            return absent(why) if _not_found(e) else failed(why)
        values = [p[2] for p in points or ()]
        if not values:
            return absent('%s of %s: no point from %s to %s at %g s' % (
                metric, instance.uuid, start.isoformat(), stop.isoformat(),
                float(win.granularity)))
        return measured(sum(values) / len(values))
