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

"""A private PostgreSQL cluster for the cloud's databases.

Debian's PostgreSQL server binaries run a cluster of our own (``initdb``
into the cloud directory, a port on 127.0.0.1, its socket beside the
data), so the machine's own cluster, if any, is never touched. PostgreSQL
refuses to run as root: the cluster runs as the ``postgres`` user that the
Debian package creates. Authentication is ``trust`` on loopback only: the
cluster serves one machine's test cloud, nothing else can reach it.
"""

import glob
import os
import pwd
import shutil
import signal
import subprocess
import time

from rdt_virt.cloud import process

USER = 'postgres'


def server_bin(tool):
    """Path of a PostgreSQL server tool, newest installed major first."""
    found = sorted(glob.glob('/usr/lib/postgresql/*/bin/' + tool),
                   key=lambda p: int(p.split('/')[4]), reverse=True)
    if found:
        return found[0]
    path = shutil.which(tool)
    if not path:
        raise process.ProcessError(
            'PostgreSQL is not installed (apt-get install postgresql)')
    return path


class Cluster(object):

    NAME = 'postgresql'

    def __init__(self, daemons, data_dir, port):
        self.daemons = daemons
        self.data_dir = data_dir
        self.port = port

    @property
    def socket_dir(self):
        return self.data_dir + '-run'

    def url(self, database, driver='postgresql+psycopg2'):
        return '%s://%s@127.0.0.1:%d/%s' % (
            driver, USER, self.port, database)

    def _chown(self, path):
        pw = pwd.getpwnam(USER)
        os.makedirs(path, exist_ok=True)
        os.chown(path, pw.pw_uid, pw.pw_gid)

    def start(self):
        log = self.daemons.log_file(self.NAME)
        os.makedirs(self.daemons.log_dir, exist_ok=True)
        if not os.path.exists(os.path.join(self.data_dir, 'PG_VERSION')):
            self._chown(self.data_dir)
            process.run([server_bin('initdb'), '-D', self.data_dir,
                         '--auth=trust', '--encoding=UTF8', '--locale=C'],
                        log=log, user=USER)
        self._chown(self.socket_dir)
        self.daemons.start(self.NAME, [
            'runuser', '-u', USER, '--', server_bin('postgres'),
            '-D', self.data_dir, '-p', str(self.port),
            '-c', 'listen_addresses=127.0.0.1',
            '-c', 'unix_socket_directories=' + self.socket_dir,
            '-c', 'fsync=off', '-c', 'max_connections=200',
            '-c', 'shared_buffers=64MB'], marker='postgres')
        self.daemons.wait_port(self.NAME, self.port, timeout=60)
        return self

    def stop(self):
        # postgres stops cleanly (fast shutdown) on SIGINT; SIGTERM waits
        # for the clients, which a cloud going down may still hold.
        pid = self.daemons.pid(self.NAME)
        if pid:
            os.killpg(pid, signal.SIGINT)
            for _ in range(100):
                if not self.daemons.pid(self.NAME):
                    break
                time.sleep(0.2)
        self.daemons.stop(self.NAME)

    def psql(self, sql, database='postgres'):
        return subprocess.run(
            ['runuser', '-u', USER, '--', 'psql', '-h', self.socket_dir,
             '-p', str(self.port), '-d', database, '-v', 'ON_ERROR_STOP=1',
             '-tAc', sql], check=True, capture_output=True,
            text=True).stdout

    def create_database(self, name):
        """Create database ``name`` unless it exists; returns its URL."""
        if not self.psql("SELECT 1 FROM pg_database WHERE datname = '%s'"
                         % name).strip():
            self.psql('CREATE DATABASE "%s"' % name)
        return self.url(name)
