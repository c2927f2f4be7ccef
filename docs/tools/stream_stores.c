/* P4's loop, sqrt(x)*3-x over N floats (argument 1), for ROUNDS rounds
 * (2), into a recycled output or (3 = 1) a fresh MADV_HUGEPAGE mapping per
 * run: plain AVX2 stores against streaming ones, one and two threads.
 * docs/performance.md, "Streaming stores for a large collect".
 * gcc -O2 -mavx2 -mfma -pthread stream_stores.c -lm; ./a.out 10000000 6 0 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <pthread.h>
#include <sys/mman.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct {const float*x; float*y; size_t lo,hi; int nt;} A;
static void* work(void*p){A*a=p; const float*x=a->x; float*y=a->y; size_t i=a->lo;
 __m256 three=_mm256_set1_ps(3.f);
 if(a->nt){ while(i<a->hi && ((size_t)(y+i)&31)){y[i]=sqrtf(x[i])*3.f-x[i];i++;}
   for(;i+8<=a->hi;i+=8){__m256 v=_mm256_loadu_ps(x+i); __m256 r=_mm256_sub_ps(_mm256_mul_ps(_mm256_sqrt_ps(v),three),v); _mm256_stream_ps(y+i,r);} }
 else { for(;i+8<=a->hi;i+=8){__m256 v=_mm256_loadu_ps(x+i); __m256 r=_mm256_sub_ps(_mm256_mul_ps(_mm256_sqrt_ps(v),three),v); _mm256_storeu_ps(y+i,r);} }
 for(;i<a->hi;i++) y[i]=sqrtf(x[i])*3.f-x[i];
 return 0;}
int main(int c,char**v){size_t n=atol(v[1]); int rounds=atoi(v[2]); int fresh=atoi(v[3]);
 float*x=malloc(n*4); float*y=malloc(n*4); for(size_t i=0;i<n;i++){x[i]=(i%1000)*0.001f;y[i]=0;}
 for(int r=0;r<rounds;r++){ for(int th=1;th<=2;th++) for(int nt=0;nt<2;nt++){
   float*yy=y; if(fresh){yy=mmap(0,n*4,PROT_READ|PROT_WRITE,MAP_PRIVATE|MAP_ANONYMOUS,-1,0); madvise(yy,n*4,MADV_HUGEPAGE);} double t0=now(); A a[2]; pthread_t t[2];
   for(int k=0;k<th;k++){a[k]=(A){x,yy,n*k/th,n*(k+1)/th,nt}; pthread_create(&t[k],0,work,&a[k]);}
   for(int k=0;k<th;k++) pthread_join(t[k],0);
   double t1=now(); printf("th=%d nt=%d %.3f ms  ",th,nt,(t1-t0)*1e3); if(fresh) munmap(yy,n*4);} printf("\n");}
 _mm_sfence(); printf("%f\n",y[n/2]); }
