/* First writes of a fresh 40 MB mapping from one and from two threads,
 * with (argument 1) or without (0) MADV_HUGEPAGE: docs/performance.md,
 * "cpu-parallel writing fresh pages". gcc -O2 -pthread first_touch.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {float*p;size_t n;} arg;
static void* w(void*a_){arg*a=a_;for(size_t i=0;i<a->n;i++)a->p[i]=1.0f;return 0;}
int main(int c,char**v){size_t n=10000000; int huge=atoi(v[1]);
 for(int r=0;r<6;r++) for(int th=1;th<=2;th++){
  float*p=mmap(0,n*4,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0);
  if(huge)madvise(p,n*4,MADV_HUGEPAGE);
  double t=now(); pthread_t t1; arg a={p,n/th},b={p+n/th,n-n/th};
  if(th==2){pthread_create(&t1,0,w,&b);w(&a);pthread_join(t1,0);} else w(&a);
  double e=now()-t; printf("huge=%d threads=%d %.2f ms (%.2f GB/s)\n",huge,th,e*1e3,n*4/e/1e9);
  munmap(p,n*4);}
}
