/* What a fence costs (issue 11, docs/design.md "The fence"): mprotect(PROT_READ) and back over
 * 256 MiB of populated 4 KiB pages, whole, and run by run over a random 1 / 10 / 50% of the
 * pages (one mprotect per run of consecutive pages, as a fence over the dirty runs only would
 * need). Not part of the build or the tests; run by hand:
 *     cc -O2 scripts/fence-cost.c -o /tmp/fence-cost && /tmp/fence-cost
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec*1e3+t.tv_nsec/1e6;}
int main(){
  size_t ps=4096, n=65536, sz=n*ps;
  char*p=mmap(0,sz,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  madvise(p,sz,MADV_NOHUGEPAGE);
  memset(p,1,sz);
  for(int rep=0;rep<3;rep++){
    double t0=now(); mprotect(p,sz,PROT_READ); double t1=now(); mprotect(p,sz,PROT_READ|PROT_WRITE); double t2=now();
    printf("whole: fence %.2f lift %.2f ms\n",t1-t0,t2-t1);
  }
  double fr[]={0.01,0.10,0.5};
  for(int f=0;f<3;f++){
    srand(1); char*sel=calloc(n,1); for(size_t i=0;i<n*fr[f];i++) sel[rand()%n]=1; /* a random share of the pages */
    size_t runs=0; for(size_t i=0;i<n;i++) if(sel[i]&&(i==0||!sel[i-1])) runs++;
    double t0=now();
    for(size_t i=0;i<n;){ if(!sel[i]){i++;continue;} size_t j=i; while(j<n&&sel[j]) j++; mprotect(p+i*ps,(j-i)*ps,PROT_READ); i=j;}
    double t1=now();
    for(size_t i=0;i<n;){ if(!sel[i]){i++;continue;} size_t j=i; while(j<n&&sel[j]) j++; mprotect(p+i*ps,(j-i)*ps,PROT_READ|PROT_WRITE); i=j;}
    double t2=now();
    /* lift in random order */
    for(size_t i=0;i<n;){ if(!sel[i]){i++;continue;} size_t j=i; while(j<n&&sel[j]) j++; mprotect(p+i*ps,(j-i)*ps,PROT_READ); i=j;}
    double t3=now(); mprotect(p,sz,PROT_READ|PROT_WRITE); double t4=now();
    printf("%.0f%%: runs %zu per-run fence %.2f lift %.2f ms; fence again %.2f, whole lift %.2f\n",fr[f]*100,runs,t1-t0,t2-t1,t3-t2,t4-t3);
  }
}
