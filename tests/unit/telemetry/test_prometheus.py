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

"""The Prometheus endpoint serves the latest state document."""

import urllib.request

from tests import base
from tests.unit.telemetry import test_pollsters

UUID1 = test_pollsters.UUID1
UUID2 = test_pollsters.UUID2


class TestPrometheus(base.TestCase):

    def setUp(self):
        super().setUp()
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            self.skipTest('prometheus-client is not installed')
        from rdt_virt.telemetry import prometheus
        self.prometheus = prometheus
        self.doc = test_pollsters.document(1000.0)
        self.doc['host'] = {'mbm_total_bps': 1.5e8, 'rmids_total': 176,
                            'rmids_used': 4, 'coverage': 0.5,
                            'rotating': True}

    def text(self, doc=None, totals=None):
        from prometheus_client import exposition
        registry = self.prometheus.registry_for(
            lambda: self.doc if doc is None else doc, lambda: totals)
        return exposition.generate_latest(registry).decode()

    def test_instance_metrics_labelled_by_uuid(self):
        text = self.text()
        self.assertIn(
            'rdt_virt_instance_memory_bandwidth_total_bytes_per_second{'
            'domain="instance-1",group="rdtvirt-mb10",instance_uuid="%s"} '
            '1.5e+08' % UUID1, text)
        self.assertIn('rdt_virt_instance_llc_occupancy_bytes{domain='
                      '"instance-1",group="rdtvirt-mb10",instance_uuid="%s"}'
                      ' 4.194304e+06' % UUID1, text)
        # No value: no sample, but the monitored flag says so.
        self.assertNotIn('bytes_per_second{domain="instance-2"', text)
        self.assertIn('rdt_virt_instance_monitored{domain="instance-2",'
                      'group="",instance_uuid="%s"} 0.0' % UUID2, text)

    def test_host_and_agent_metrics(self):
        text = self.text(totals={'ticks': 3, 'writes': 12, 'errors': 0,
                                 'events': 1, 'tick_cpu': 0.004})
        for line in ('rdt_virt_host_rmids 176.0',
                     'rdt_virt_host_rmids_used 4.0',
                     'rdt_virt_host_monitoring_coverage_ratio 0.5',
                     'rdt_virt_host_monitoring_rotating 1.0',
                     'rdt_virt_agent_writes_total 12.0',
                     'rdt_virt_agent_tick_cpu_seconds 0.004'):
            self.assertIn(line, text)

    def test_ceiling_and_counter_assignment(self):
        self.doc['host'].update(bandwidth_ceiling_bps=4.0e11,
                                counter_resets=2, mbm_counters_total=32,
                                mbm_counters_available=0,
                                counter_coverage=0.4)
        text = self.text()
        for line in (
                'rdt_virt_host_memory_bandwidth_ceiling_bytes_per_second '
                '4e+11',
                'rdt_virt_host_mbm_counter_resets 2.0',
                'rdt_virt_host_mbm_counters 32.0',
                'rdt_virt_host_mbm_counters_available 0.0',
                'rdt_virt_host_mbm_counter_coverage_ratio 0.4'):
            self.assertIn(line, text)

    def test_no_document_yet(self):
        self.assertIn('rdt_virt_instance_monitored', self.text(doc={}))

    def test_http_endpoint_on_loopback(self):
        server = self.prometheus.serve('127.0.0.1', 0, lambda: self.doc)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        port = server.server_address[1]
        with urllib.request.urlopen('http://127.0.0.1:%d/metrics' % port,
                                    timeout=5) as reply:
            body = reply.read().decode()
        self.assertIn(UUID1, body)
