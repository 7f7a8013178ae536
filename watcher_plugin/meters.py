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

"""What rdt_noisy_neighbor reads from Gnocchi, and over which window.

Gnocchi stamps each aggregated point with the start of its interval
(``granularity`` seconds) and returns the points whose stamp lies in
``[start, stop)``. A window that starts ``period`` seconds ago in the
middle of an interval would leave out the point that covers its first
seconds, and a ``period`` shorter than the granularity could fall between
two stamps and read nothing at all. :func:`window` therefore starts the
window at the stamp of the interval that holds ``now - period`` and is
never shorter than one granularity.

:class:`Meters` is the datasource the strategy hands to Watcher: the
Gnocchi helper, with the strategy's own meters as its metric map, so that
``openstack optimize strategy state rdt_noisy_neighbor`` lists the meters
the strategy reads (``memory.bandwidth.total``, ``memory.bandwidth.limit``)
rather than the upstream strategy's ``cpu_l3_cache``.
"""

import datetime
import math

BANDWIDTH = 'memory.bandwidth.total'
LIMIT = 'memory.bandwidth.limit'
METERS = (BANDWIDTH, LIMIT)


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


class Meters(object):
    """Watcher's Gnocchi helper, presenting the strategy's meters."""

    NAME = 'gnocchi'
    METRIC_MAP = {meter: meter for meter in METERS}

    def __init__(self, helper):
        self.helper = helper
        self.gnocchi = helper.gnocchi

    def list_metrics(self):
        return self.helper.list_metrics()

    def check_availability(self):
        return self.helper.check_availability()

    def __getattr__(self, name):
        return getattr(self.helper, name)
