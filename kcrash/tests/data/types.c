/* Globals of every kind of C type, for kcrash's print tests: built with gcc -g, run under gdb until
 * abort(), saved with gcore, then printed by kcrash and by gdb (tests/print_vs_gdb.rs). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

enum color { RED, GREEN, BLUE = 5 };
enum flags { F_NONE = 0, F_READ = 1, F_WRITE = 2, F_EXEC = 4 };
enum neg { MINUS = -2, ZERO = 0 };
struct point { int x, y; };
union word { unsigned int u; float f; unsigned char b[4]; };
typedef struct point point_t;
struct flex { int n; int data[]; };
struct cflex { int n; char name[]; };

struct mixed {
    bool ok;
    signed char sc;
    unsigned char uc;
    short s;
    unsigned short us;
    long l;
    float f;
    double d;
    enum color c;
    enum flags fl;
    enum flags fl2;
    enum neg n;
    struct point pts[2][3];
    union { int i; char tag[4]; };
    struct { int a; int b; } inner;
    char text[40];
    const char *msg;
    const char *nul;
    const char **pp;
    void (*fn)(int);
    point_t *self_pt;
    unsigned int bits_a : 3;
    int bits_b : 5;
    long long big;
    unsigned long long ubig;
};

struct mixed M;
int grid[3][4];
int zeros[300];
char long_text[300];
char escapes[16];
const char *long_ptr;
union word W;
point_t P = {3, -4};
struct flex FLEX = {2, {7, 8}};
struct cflex CFLEX = {3, "abc"};
float F_TENTH = 0.1f, F_DENORMAL = 1e-40f, F_BIG = 123456789.0f;
double D_TENTH = 0.1, D_BIG = 1e20, D_SMALL = 1e-5, D_THIRD = 1.0 / 3, D_NEGZERO = -0.0;
double D_INF, D_NAN, D_NEGNAN;
static void handler(int sig) { (void)sig; }

int main(void) {
    M.ok = true; M.sc = -5; M.uc = 200; M.s = -300; M.us = 60000; M.l = -1234567890123L;
    M.f = 1.5f; M.d = -0.25; M.c = BLUE; M.fl = F_READ | F_EXEC; M.fl2 = (enum flags)(F_WRITE | 16);
    M.n = MINUS;
    for (int i = 0; i < 2; i++) for (int j = 0; j < 3; j++) { M.pts[i][j].x = i; M.pts[i][j].y = j * 10; }
    M.i = 0x41424344;
    M.inner.a = 7; M.inner.b = 8;
    strcpy(M.text, "hello\tworld\n\"quoted\"");
    M.msg = "a message";
    M.nul = NULL;
    M.pp = &M.msg;
    M.fn = handler;
    M.self_pt = &P;
    M.bits_a = 5; M.bits_b = -3;
    M.big = -9000000000000000000LL; M.ubig = 18000000000000000000ULL;
    for (int i = 0; i < 3; i++) for (int j = 0; j < 4; j++) grid[i][j] = i * 4 + j;
    memset(long_text, 'x', 250);
    memcpy(escapes, "\001\002\033\177\200\377ab\\'", 10);
    long_ptr = long_text;
    W.f = 2.0f;
    D_INF = __builtin_inf();
    D_NAN = __builtin_nan("");
    D_NEGNAN = -__builtin_nan("");
    abort();
}
