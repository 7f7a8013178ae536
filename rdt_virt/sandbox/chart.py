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

"""The reference scenario's chart, drawn with matplotlib (``rdt-virt[plot]``).

Top left: the protected guest's work rate in each phase as a share of the
alone phase; top right: every guest's memory bandwidth in each phase. Bars
are means, error bars one standard deviation over the phase's samples.
Below, where the data has a timeline (the controller's phases): each
guest's controller level and the protected guest's work rate over time.

The chart takes plain data (see :func:`write`), not the scenario: what is
drawn can be built and tested apart from what runs the guests.
"""


class Unavailable(Exception):
    """matplotlib is not installed."""


def write(data, path):
    """Draw *data* into *path*.

    The format follows the file name's extension (``.png``, ``.svg``).

    :param data: ``{'title': str, 'guests': [name, ...], 'protected': name,
        'phases': [{'label': str, 'number': int, 'share': (mean, sd) or
        None, 'mbm': {name: (mean, sd) or None}}, ...], 'timeline': None
        or {'marks':
        [(t, label)], 'levels': {name: [(t, percent)]}, 'work': [(t,
        value)], 'relative': whether work values are shares of the alone
        phase, 'target': share to mark}}``: shares are fractions of the
        alone phase, bandwidths bytes/s, times seconds.
    :returns: *path*.
    :raises Unavailable: without matplotlib.
    """
    try:
        import matplotlib
        matplotlib.use('Agg')
        from matplotlib import pyplot
    except ImportError:
        raise Unavailable('matplotlib is not installed; pip install '
                          '"rdt-virt[plot]"')
    phases = data['phases']
    guests = data['guests']
    labels = [p['label'] for p in phases]
    numbers = [str(p.get('number', i)) for i, p in enumerate(phases, 1)]
    timeline = data.get('timeline')
    if timeline:
        fig = pyplot.figure(figsize=(13, 10))
        grid = fig.add_gridspec(3, 2, width_ratios=[1, 2],
                                height_ratios=[2, 1, 1])
        left = fig.add_subplot(grid[0, 0])
        right = fig.add_subplot(grid[0, 1])
        levels = fig.add_subplot(grid[1, :])
        work = fig.add_subplot(grid[2, :], sharex=levels)
        _timeline(timeline, guests, data['protected'], levels, work)
    else:
        fig, (left, right) = pyplot.subplots(
            1, 2, figsize=(13, 5), gridspec_kw={'width_ratios': [1, 2]})

    shares = [p.get('share') or (0.0, 0.0) for p in phases]
    xs = range(len(phases))
    left.bar(xs, [100 * s[0] for s in shares],
             yerr=[100 * s[1] for s in shares], capsize=4,
             color=['#4c72b0'] + ['#dd8452'] * (len(phases) - 1))
    left.set_xticks(list(xs))
    left.set_xticklabels(numbers)
    left.set_ylabel('work rate, % of the alone phase')
    left.set_title('Protected guest')
    left.axhline(100, color='grey', linewidth=0.8, linestyle='--')

    width = 0.8 / len(guests)
    for g, name in enumerate(guests):
        means, errs = [], []
        for phase in phases:
            value = phase['mbm'].get(name)
            means.append(value[0] / 1e6 if value else 0.0)
            errs.append(value[1] / 1e6 if value else 0.0)
        right.bar([x - 0.4 + width * (g + 0.5) for x in xs], means, width,
                  yerr=errs, capsize=2, label=name,
                  color='#4c72b0' if name == data['protected'] else None)
    right.set_xticks(list(xs))
    right.set_xticklabels(numbers)
    right.set_ylabel('memory bandwidth, MB/s (emulated MBM)')
    right.set_title('Every guest')
    right.legend(fontsize='small', ncol=2)
    fig.text(0.01, 0.01, '\n'.join(labels), fontsize='small', va='bottom')
    fig.suptitle(data['title'])
    fig.tight_layout(rect=(0, 0.12 if not timeline else 0.1, 1, 0.95))
    fig.savefig(path)
    pyplot.close(fig)
    return path


def _timeline(timeline, guests, protected, levels, work):
    for name in guests:
        series = timeline['levels'].get(name)
        if not series:
            continue
        levels.step([t for t, _v in series], [v for _t, v in series],
                    where='post', label=name,
                    color='#4c72b0' if name == protected else None,
                    linewidth=2 if name == protected else 1)
    levels.set_ylabel('controller level, %\n(100: not throttled)')
    levels.set_ylim(0, 105)
    levels.set_title('Timeline of the controller\'s phases')
    levels.legend(fontsize='x-small', ncol=4, loc='lower right')
    points = timeline['work']
    scale = 100.0 if timeline.get('relative') else 1 / (1024.0 * 1024)
    # NaN breaks the line where the recording has a gap.
    work.plot([t for t, _v in points],
              [float('nan') if v is None else v * scale for _t, v in points],
              color='#4c72b0', marker='.', markersize=3)
    if timeline.get('relative'):
        work.set_ylabel('protected work rate,\n% of alone')
        work.axhline(100 * timeline.get('target', 0.9), color='grey',
                     linewidth=0.8, linestyle='--')
    else:
        work.set_ylabel('protected work rate,\nMiB/s')
    work.set_xlabel('seconds since the scenario started')
    for axis in (levels, work):
        for t, _label in timeline['marks']:
            axis.axvline(t, color='grey', linewidth=0.8, linestyle=':')
    for t, label in timeline['marks']:
        levels.annotate(label, (t, 102), fontsize='small')
