import json, glob, statistics as st, sys, re
import os
D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
rounds=sorted({int(re.search(r'-(\d+)\.json',f).group(1)) for f in glob.glob(D+'/before-*.json')})
rounds=[i for i in rounds if glob.glob(f'{D}/after-{i}.json')]
def load(x,i): return json.load(open(f'{D}/{x}-{i}.json'))
B={i:load('before',i) for i in rounds}; A={i:load('after',i) for i in rounds}
def metrics(d):
    m={}
    for c in d['comparisons']:
        if c['name']=='sync_checkpoint_writing_thread': continue
        key=c['name']+('' if c['dirty_percent'] is None else f" {c['dirty_percent']}%")
        m[key]=c['median_ratio']
    s=d['sequential_first_write']
    m['first write, sequential: tracked/plain']=s['tracked_ns_per_page']/s['plain_ns_per_page']
    m['first write, sequential: tracked ns/page']=s['tracked_ns_per_page']
    for c in d['cases']:
        m[f"first write, {c['dirty_percent']}% dirty: tracked/plain"]=c['tracked_first_write_ns_per_page']/c['plain_write_ns_per_page']
    for c in d['cases']:
        m[f"first write, {c['dirty_percent']}% dirty: tracked ns/page"]=c['tracked_first_write_ns_per_page']
    return m
MB={i:metrics(B[i]) for i in rounds}; MA={i:metrics(A[i]) for i in rounds}
keys=list(MA[rounds[0]].keys())
print(f"rounds: {rounds}  backend before {[B[i]['backend'] for i in rounds]} after {[A[i]['backend'] for i in rounds]}")
print("sizes", {B[i]['size_mib'] for i in rounds}, {A[i]['size_mib'] for i in rounds})
print("run_seconds before", [round(B[i]['run_seconds']) for i in rounds], "after", [round(A[i]['run_seconds']) for i in rounds])
print("full ckpt bytes", {B[i]['full_checkpoint']['bytes'] for i in rounds}, {A[i]['full_checkpoint']['bytes'] for i in rounds})
def f(x): return f"{x:.3f}" if x<10 else f"{x:.0f}"
rows=[]
print("| comparison (ickpt/baseline, median of a run's reps) | before: median (min–max) | after: median (min–max) | after/before per round | after/before: median (min–max) |")
print("|---|---|---|---|---|")
for k in keys:
    b=[MB[i][k] for i in rounds]; a=[MA[i][k] for i in rounds]; q=[MA[i][k]/MB[i][k] for i in rounds]
    print(f"| {k} | {f(st.median(b))} ({f(min(b))}–{f(max(b))}) | {f(st.median(a))} ({f(min(a))}–{f(max(a))}) | {' '.join(f'{x:.2f}' for x in q)} | **{st.median(q):.2f}** ({min(q):.2f}–{max(q):.2f}) |")
