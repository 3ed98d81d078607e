import os, sys
import json, glob, re, statistics as st, sys
D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
X=['before','mixed','after']
rounds=sorted({int(re.search(r'-(\d+)\.json$',f).group(1)) for f in glob.glob(D+'/after-*.json')})
rounds=[i for i in rounds if all(glob.glob(f'{D}/{x}-{i}.json') for x in X)]
def load(x,i):
    try: return json.load(open(f'{D}/{x}-{i}.json'))
    except Exception: return None
data={(x,i):load(x,i) for x in X for i in rounds}
rounds=[i for i in rounds if all(data[(x,i)] for x in X)]
def comp(d,name): return [c for c in d['comparisons'] if c['name']==name][0]
def fm(v): return f"{st.median(v):.0f} ({min(v):.0f}–{max(v):.0f})"
print('rounds',rounds)
for x in X:
    print(x, 'commit', {data[(x,i)]['git_commit'] for i in rounds}, 'backend', {data[(x,i)]['backend'] for i in rounds},
          'env', {json.dumps(data[(x,i)]['environment']) for i in rounds}, 'run_s', [round(data[(x,i)]['run_seconds']) for i in rounds],
          'writing_thread row', any(c['name']=='sync_checkpoint_writing_thread' for c in data[(x,rounds[0])]['comparisons']),
          'reported MiB', [data[(x,i)]['free_page_reporting'].get('reported_mib_during_run') for i in rounds])
rows={}
for x in X:
    r0=[];r0b=[];r12=[];r12b=[];w=[];cc=[]
    for i in rounds:
        d=data[(x,i)]; c=comp(d,'restore_cold')['reps']
        r0.append(c[0]['ickpt_ms']); r0b.append(c[0]['baseline_ms'])
        r12 += [p['ickpt_ms'] for p in c[1:]]; r12b += [p['baseline_ms'] for p in c[1:]]
        w += [p['ickpt_ms'] for p in comp(d,'restore_warm')['reps']]
        cc += [p['ickpt_ms'] for p in comp(d,'chain_restore_cold')['reps']]
        assert c[0]['ickpt_first']
    rows[x]=(r0,r0b,r12,r12b,w,cc)
    print(f"{x:7s} cold rep0 ickpt {fm(r0)} | rep0 plain read {fm(r0b)} | cold rep1-2 ickpt {fm(r12)} | rep1-2 read {fm(r12b)} | warm ickpt {fm(w)} | chain cold {fm(cc)} | rep0>600ms: {sum(v>600 for v in r0)}/{len(r0)}")
print('per round, cold rep 0 ickpt ms:')
for k,i in enumerate(rounds):
    print(i, ' '.join(f"{x}={rows[x][0][k]:.0f}" for x in X))
print('| round | order | before | mixed | after |')
PERMS=["before mixed after","after before mixed","mixed after before","before after mixed","mixed before after","after mixed before"]
for k,i in enumerate(rounds):
    b,m,a=(rows[x][0][k] for x in X)
    print(f"| {i} | {PERMS[i%6]} | {b:.0f} | {m:.0f} | {a:.0f} | {m/b:.2f} | {a/b:.2f} | {a/m:.2f} |")
q=lambda u,v:[x/y for x,y in zip(rows[u][0],rows[v][0])]
for u,v in [('mixed','before'),('after','before'),('after','mixed')]:
    qq=q(u,v); print(u,'/',v,f"median {st.median(qq):.2f} ({min(qq):.2f}–{max(qq):.2f}), above 1 in {sum(x>1 for x in qq)}/{len(qq)}")
