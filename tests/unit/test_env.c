/*
 * test_env.c - the table of environment variables (src/base/env.c): the
 * one yes/no word set, the typed look-ups and their bad-value line, the
 * docs that must follow the table (docs/cli.md, "Environment variables",
 * and every TRACEML_* the docs mention), and the in-process host reading
 * TRACEML_HTML_REPORT with those words (=false meant on before).
 */
#include <ctype.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/env.h"
#include "base/fs.h"
#include "traceml/traceml.h"
#include "harness.h"

static void test_yes_no_words(void)
{
    const char *no[] = {NULL, "", "0", "false", "FALSE", "no", "No", "off", "OFF"};
    const char *yes[] = {"1", "true", "yes", "on", "2", "anything"};
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        CHECK(!tml__env_yes(no[i]));
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        CHECK(tml__env_yes(yes[i]));
    /* a boolean's default when unset or empty, the words otherwise */
    unsetenv("TRACEML_COMM");
    CHECK_EQ_INT(tml__env_bool(TML_ENV_COMM), 1);
    setenv("TRACEML_COMM", "", 1);
    CHECK_EQ_INT(tml__env_bool(TML_ENV_COMM), 1);
    setenv("TRACEML_COMM", "off", 1);
    CHECK_EQ_INT(tml__env_bool(TML_ENV_COMM), 0);
    unsetenv("TRACEML_COMM");
    setenv("TRACEML_SLURM", "false", 1);   /* "0" only, before */
    CHECK_EQ_INT(tml__env_bool(TML_ENV_SLURM), 0);
    unsetenv("TRACEML_SLURM");
}

static void test_typed_values_and_bad_lines(void)
{
    char bad[160];
    unsetenv("TRACEML_WINDOW_STEPS");
    CHECK_EQ_INT(tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad)), 10000);
    CHECK_STR(bad, "");
    setenv("TRACEML_WINDOW_STEPS", "500", 1);
    CHECK_EQ_INT(tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad)), 500);
    CHECK_STR(bad, "");
    const char *wrong[] = {"abc", "1", "10001", "50x", " ", "-3"};
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        setenv("TRACEML_WINDOW_STEPS", wrong[i], 1);
        CHECK_EQ_INT(tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad)), 10000);
        CHECK(strstr(bad, "is not an integer from 2 to 10000; using 10000") != NULL);
    }
    setenv("TRACEML_WINDOW_STEPS", "abc", 1);
    tml__env_int(TML_ENV_WINDOW_STEPS, bad, sizeof(bad));
    CHECK_STR(bad, "TRACEML_WINDOW_STEPS='abc' is not an integer from 2 to 10000; using 10000");
    unsetenv("TRACEML_WINDOW_STEPS");

    setenv("TRACEML_INTERVAL", "0.25", 1);
    CHECK_NEAR(tml__env_double(TML_ENV_INTERVAL, bad, sizeof(bad)), 0.25, 1e-12);
    setenv("TRACEML_INTERVAL", "0", 1);
    CHECK_NEAR(tml__env_double(TML_ENV_INTERVAL, bad, sizeof(bad)), 1.0, 1e-12);
    CHECK_STR(bad, "TRACEML_INTERVAL='0' is not a number from 0.01 to 3600; using 1");
    setenv("TRACEML_INTERVAL", "nan", 1);
    CHECK_NEAR(tml__env_double(TML_ENV_INTERVAL, NULL, 0), 1.0, 1e-12);
    unsetenv("TRACEML_INTERVAL");

    unsetenv("TRACEML_LIBNVML");
    CHECK_STR(tml__env_str(TML_ENV_LIBNVML), "libnvidia-ml.so.1");
    setenv("TRACEML_ADDR", "", 1);
    CHECK(tml__env_str(TML_ENV_ADDR) == NULL);
    unsetenv("TRACEML_ADDR");
    CHECK(tml__env_find("TRACEML_NOT_A_VARIABLE") == NULL);   /* by id: it would not compile */
    CHECK_STR(tml__env_name(TML_ENV_WINDOW_STEPS), "TRACEML_WINDOW_STEPS");
    CHECK(tml__env_find("TRACEML_WINDOW_STEPS") == tml__env_var(TML_ENV_WINDOW_STEPS));
    CHECK_EQ_INT(tml__env_int(TML_ENV_ADDR, NULL, 0), 0);   /* not an int */

    /* the one integer parser, for other programs' variables too */
    setenv("TML_TEST_COUNT", "12", 1);
    CHECK_EQ_INT(tml__env_count("TML_TEST_COUNT", 7), 12);
    setenv("TML_TEST_COUNT", "12x", 1);
    CHECK_EQ_INT(tml__env_count("TML_TEST_COUNT", 7), 7);
    setenv("TML_TEST_COUNT", "-1", 1);
    CHECK_EQ_INT(tml__env_count("TML_TEST_COUNT", 7), 7);
    unsetenv("TML_TEST_COUNT");
}

/* The public look-up the Python package calls. */
static void test_tml_config(void)
{
    char out[64];
    setenv("TRACEML_HTML_REPORT", "false", 1);
    CHECK_STR(tml_config("TRACEML_HTML_REPORT", out, sizeof(out)), "bool");
    CHECK_STR(out, "0");
    setenv("TRACEML_HTML_REPORT", "yes", 1);
    tml_config("TRACEML_HTML_REPORT", out, sizeof(out));
    CHECK_STR(out, "1");
    unsetenv("TRACEML_HTML_REPORT");
    CHECK_STR(tml_config("TRACEML_ON_MISSING_AGGREGATOR", out, sizeof(out)), "string");
    CHECK_STR(out, "warn");
    CHECK_STR(tml_config("TRACEML_WINDOW_STEPS", out, sizeof(out)), "int");
    CHECK_STR(out, "10000");
    CHECK(tml_config("PATH", out, sizeof(out)) == NULL);
}

/* ---- the docs follow the table ------------------------------------------- */

static char *read_text(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    if (tml__read_file(path, 1 << 22, &buf, &len) < 0)
        return NULL;
    return buf;
}

/* Cell k (0-based) of a markdown table row, without spaces and backquotes. */
static void cell(const char *row, int k, char *out, size_t cap)
{
    const char *p = row;
    out[0] = '\0';
    for (int i = 0; i <= k; i++) {
        p = strchr(p, '|');
        if (!p)
            return;
        p++;
    }
    const char *end = strchr(p, '|');
    size_t n = 0;
    for (; p < end && n + 1 < cap; p++)
        if (*p != '`')
            out[n++] = *p;
    out[n] = '\0';
    while (n && out[n - 1] == ' ')
        out[--n] = '\0';
    size_t lead = strspn(out, " ");
    memmove(out, out + lead, n - lead + 1);
}

static void sides_text(unsigned sides, char *out, size_t cap)
{
    static const char *const words[] = {"launcher", "engine", "aggregator"};
    out[0] = '\0';
    for (int b = 0; b < 3; b++)
        if (sides & (1u << b))
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", out[0] ? ", " : "",
                     words[b]);
}

static void range_text(const tml_env_var *e, char *out, size_t cap)
{
    out[0] = '\0';
    if (e->type == TML_ENV_INT || e->type == TML_ENV_DOUBLE)
        snprintf(out, cap, "%.10g to %.10g", e->min, e->max);
}

static void check_row(const tml_env_var *e, const char *row)
{
    char got[256], want[256];
    cell(row, 1, got, sizeof(got));
    CHECK_STR(got, tml__env_type_name(e->type));
    cell(row, 2, got, sizeof(got));
    snprintf(want, sizeof(want), "%s", !e->def ? "" : e->type != TML_ENV_BOOL ? e->def
                                         : tml__env_yes(e->def) ? "on" : "off");
    CHECK_STR(got, want);
    cell(row, 3, got, sizeof(got));
    range_text(e, want, sizeof(want));
    CHECK_STR(got, want);
    cell(row, 4, got, sizeof(got));
    sides_text(e->sides, want, sizeof(want));
    CHECK_STR(got, want);
    cell(row, 5, got, sizeof(got));
    snprintf(want, sizeof(want), "%s%s", e->key && strcmp(e->key, "thresholds") != 0 ? "--" : "",
             e->key ? e->key : "");
    CHECK_STR(got, want);
    if (strcmp(got, want) != 0 || strcmp(tml__env_type_name(e->type), "?") == 0)
        fprintf(stderr, "  docs/cli.md row of %s\n", e->name);
}

/* Each table entry has its row in docs/cli.md, with the same type,
 * default, range, sides and option; each row is in the table; the option
 * is one of traceml run's (the options table of docs/cli.md: its names
 * are traceml.yaml's keys). */
static void test_docs_table_follows_the_table(void)
{
    char *doc = read_text("docs/cli.md");
    CHECK(doc != NULL);
    if (!doc)
        return;
    const char *sec = strstr(doc, "\n## Environment variables\n");
    CHECK(sec != NULL);
    size_t n;
    const tml_env_var *t = tml__env_table(&n);
    for (size_t i = 0; sec && i < n; i++) {
        char head[96], opt[96];
        snprintf(head, sizeof(head), "\n| `%s` |", t[i].name);
        const char *row = strstr(sec, head);
        CHECK(row != NULL);
        if (!row) {
            fprintf(stderr, "  %s: no row in docs/cli.md\n", t[i].name);
            continue;
        }
        check_row(&t[i], row + 1);
        if (t[i].key && strcmp(t[i].key, "thresholds") != 0) {
            snprintf(opt, sizeof(opt), "`--%s", t[i].key);
            const char *at = strstr(doc, opt);
            while (at && (at[strlen(opt)] == '-' || isalnum((unsigned char)at[strlen(opt)])))
                at = strstr(at + 1, opt);
            CHECK(at != NULL && at < sec);      /* in traceml run's options table */
        }
    }
    for (const char *p = sec; p && (p = strstr(p, "\n| `TRACEML_")); p++) {
        char name[96];
        cell(p + 1, 0, name, sizeof(name));
        CHECK(tml__env_find(name) != NULL);
        if (!tml__env_find(name))
            fprintf(stderr, "  docs/cli.md names %s, which the table does not have\n", name);
    }
    free(doc);
}

/* Every TRACEML_* the docs and the README mention is in the table
 * (TRACEML_VENV is the benchmark's own, bench/overhead.py). */
static void mentions_in(const char *file)
{
    char *text = read_text(file);
    CHECK(text != NULL);
    if (!text)
        return;
    for (const char *p = text; (p = strstr(p, "TRACEML_")); p += 8) {
        char name[64];
        size_t k = strspn(p, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_0123456789");
        snprintf(name, sizeof(name), "%.*s", (int)(k < 63 ? k : 63), p);
        if (k > 8 && k < 63 && name[k - 1] != '_' && strcmp(name, "TRACEML_VENV") != 0 &&
            !tml__env_find(name)) {
            CHECK(tml__env_find(name) != NULL);
            fprintf(stderr, "  %s mentions %s, which the table does not have\n", file, name);
        }
    }
    free(text);
}

static void test_docs_mention_only_table_variables(void)
{
    mentions_in("README.md");
    DIR *d = opendir("docs");
    CHECK(d != NULL);
    for (struct dirent *e; d && (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        char path[300];
        if (n > 3 && strcmp(e->d_name + n - 3, ".md") == 0) {
            snprintf(path, sizeof(path), "docs/%s", e->d_name);
            mentions_in(path);
        }
    }
    if (d)
        closedir(d);
}

/* ---- the in-process host's TRACEML_HTML_REPORT ------------------------------ */

/* A run without a launcher, in a child (an engine runs once a process):
 * 1 when it wrote final_summary.html. */
static int html_written(const char *dir, const char *value)
{
    char name[32], path[512];
    snprintf(name, sizeof(name), "html_%s", value);
    pid_t pid = fork();
    if (pid == 0) {
        unsetenv("TRACEML_ADDR");
        setenv("TRACEML_LOGS_DIR", dir, 1);
        setenv("TRACEML_RUN_NAME", name, 1);
        setenv("TRACEML_HTML_REPORT", value, 1);
        if (tml_init(NULL) < 0)
            _exit(2);
        tml_step_begin();
        tml_step_end();
        _exit(tml_shutdown() < 0 ? 3 : 0);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    snprintf(path, sizeof(path), "%s/%s/final_summary.json", dir, name);
    struct stat sb;
    CHECK(stat(path, &sb) == 0);
    snprintf(path, sizeof(path), "%s/%s/final_summary.html", dir, name);
    return stat(path, &sb) == 0;
}

static void test_html_report_words(void)
{
    char dir[] = "/tmp/tml_test_env_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK_EQ_INT(html_written(dir, "false"), 0);   /* was on: "set and not 0" */
    CHECK_EQ_INT(html_written(dir, "off"), 0);
    CHECK_EQ_INT(html_written(dir, "1"), 1);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

#define TESTS X(test_yes_no_words) X(test_typed_values_and_bad_lines) X(test_tml_config) \
    X(test_docs_table_follows_the_table) X(test_docs_mention_only_table_variables) \
    X(test_html_report_words)
#include "harness.h"
