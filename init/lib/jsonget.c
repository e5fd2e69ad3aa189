/* jsonget: defaulted reads of validated JSON (see jsonget.h). */
#include "jsonget.h"

#include <math.h>

#include <cJSON.h>

const cJSON *jget(const cJSON *obj, const char *key)
{
    return obj ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
}

bool jget_integral(const cJSON *v)
{
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) && v->valuedouble == trunc(v->valuedouble);
}

bool jget_int(const cJSON *v, int64_t *out)
{
    if (!jget_integral(v) || fabs(v->valuedouble) > (double)JSON_INT53)
        return false;
    *out = (int64_t)v->valuedouble;
    return true;
}

bool jget_uint(const cJSON *v, uint64_t *out)
{
    if (!jget_integral(v) || v->valuedouble < 0 || v->valuedouble > (double)JSON_INT53)
        return false;
    *out = (uint64_t)v->valuedouble;
    return true;
}

int64_t jget_int_or(const cJSON *obj, const char *key, int64_t dflt)
{
    int64_t n;

    return jget_int(jget(obj, key), &n) ? n : dflt;
}

const char *jget_str_or(const cJSON *obj, const char *key, const char *dflt)
{
    const cJSON *v = jget(obj, key);

    return cJSON_IsString(v) ? v->valuestring : dflt;
}

bool jget_bool_or(const cJSON *obj, const char *key, bool dflt)
{
    const cJSON *v = jget(obj, key);

    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}
