/*
 * test_conf.c - traceml.yaml and pyproject.toml's [tool.traceml] as
 * options (base/conf.h): the shapes read, every error with its line, and
 * the keys and values that could smuggle another option in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/conf.h"
#include "traceml/traceml.h"

#include "harness.h"

static int parse(const char *name, const char *text, tml_conf *c, char *why, size_t cap)
{
    why[0] = '\0';
    return tml__conf_parse(name, text, strlen(text), c, why, cap);
}

static void test_yaml(void)
{
    tml_conf c;
    char why[256];
    CHECK_EQ_INT(parse("traceml.yaml", "# defaults\n---\nmode: cli   # the terminal\n"
                       "logs_dir: \"my logs\"\nhtml-report: true\nno-dashboard: false\n\n"
                       "thresholds:\n  input_warn: 0.15\n  input_crit: '0.3'\n"
                       "window-steps: 25\r\n", &c, why, sizeof(why)), 0);
    CHECK_EQ_INT(c.n, 4);
    if (c.n == 4) {
        CHECK_STR(c.argv[0], "--mode=cli");
        CHECK_STR(c.argv[1], "--logs-dir=my logs");
        CHECK_STR(c.argv[2], "--html-report");
        CHECK_STR(c.argv[3], "--window-steps=25");
        CHECK(c.argv[4] == NULL);
    }
    CHECK_STR(c.thresholds, "input_warn=0.15,input_crit=0.3");
    tml__conf_release(&c);
    CHECK_EQ_INT(parse("traceml.yaml", "", &c, why, sizeof(why)), 0);
    CHECK_EQ_INT(c.n, 0);
    CHECK(c.argv == NULL && c.thresholds[0] == '\0');
    tml__conf_release(&c);
}

static void test_toml(void)
{
    tml_conf c;
    char why[256];
    CHECK_EQ_INT(parse("pyproject.toml", "[project]\nname = \"x\"\ndependencies = [\n"
                       "  \"torch\",\n]\n\n[tool.traceml]\nlogs-dir = \"tlogs\"\n"
                       "[tool.traceml.thresholds]\ninput_crit = 0.3\n[tool.other]\nmode = \"y\"\n",
                       &c, why, sizeof(why)), 0);
    CHECK_EQ_INT(c.n, 1);
    if (c.n == 1)
        CHECK_STR(c.argv[0], "--logs-dir=tlogs");
    CHECK_STR(c.thresholds, "input_crit=0.3");
    tml__conf_release(&c);
}

/* Errors name the file and the line an editor shows: blank lines count
 * (they were skipped by strtok before, so the line named was too early). */
static void test_errors(void)
{
    static const struct { const char *name, *text, *why; } bad[] = {
        { "traceml.yaml", "mode: cli\n\n\nnot a pair\n", "traceml.yaml:4: expected key : value" },
        { "traceml.yaml", "\n\n: x\n", "traceml.yaml:3: a value without a key" },
        { "traceml.yaml", "mode:\n  cli: 1\n", "traceml.yaml:2: only 'thresholds' holds a map" },
        { "traceml.yaml", "\nlogs-dir: [a, b]\n", "traceml.yaml:2: 'logs-dir': lists and inline" },
        { "traceml.yaml", "mode=summary: cli\n", "traceml.yaml:1: 'mode=summary': not an option name" },
        { "traceml.yaml", "a b: 1\n", "'a b': not an option name" },
        { "traceml.yaml", "thresholds:\n  input_warn: 0.1,input_crit=0.9\n",
          "traceml.yaml:2: 'input_warn': a threshold is one number" },
        { "traceml.yaml", "thresholds:\n  input_warn:\n", "'input_warn': a threshold is one number" },
        { "pyproject.toml", "[tool.traceml]\n\n\"mode\" = 1\n", "pyproject.toml:3: '\"mode\"': not an" },
        { "pyproject.toml", "[tool.traceml]\nmode: cli\n", "pyproject.toml:2: expected key = value" },
    };
    tml_conf c;
    char why[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK_EQ_INT(parse(bad[i].name, bad[i].text, &c, why, sizeof(why)), TML_EINVAL);
        if (!strstr(why, bad[i].why))
            fprintf(stderr, "case %zu: %s\n", i, why);
        CHECK(strstr(why, bad[i].why) != NULL);
        tml__conf_release(&c);
    }
    /* a NUL byte: not text */
    CHECK_EQ_INT(tml__conf_parse("traceml.yaml", "mode: cli\0x", 11, &c, why, sizeof(why)),
                 TML_EINVAL);
    CHECK(strstr(why, "traceml.yaml: not a text file") != NULL);
    tml__conf_release(&c);
    /* the thresholds' room */
    char big[4096];
    size_t n = (size_t)snprintf(big, sizeof(big), "thresholds:\n");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(big + n, sizeof(big) - n, "  input_warn: 0.123456789\n");
    CHECK_EQ_INT(parse("traceml.yaml", big, &c, why, sizeof(why)), TML_EINVAL);
    CHECK_STR(why, "traceml.yaml: too many thresholds");
    CHECK(strlen(c.thresholds) < sizeof(c.thresholds));
    tml__conf_release(&c);
}

#define TESTS X(test_yaml) X(test_toml) X(test_errors)
#include "harness.h"
