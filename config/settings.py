"""Parley settings: everything configurable comes from environment variables (README)."""

import os
import socket
import tempfile
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django.utils.csp import CSP
from django.utils.translation import gettext_lazy as _
from redis.connection import parse_url

from config import database, secret_key

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


DEBUG = env_bool("DEBUG")

SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "Set SECRET_KEY, or DEBUG=true for development (make run, make token, make user "
            "and make chat set it)."
        )
    SECRET_KEY = "parley-insecure-development-key-do-not-deploy"  # noqa: S105
elif not DEBUG and (weak := secret_key.weakness(SECRET_KEY)):
    raise ImproperlyConfigured(weak)
# Former keys, still accepted for what they signed or sealed (core.sealed) while SECRET_KEY
# signs and seals anew.
SECRET_KEY_FALLBACKS = env_list("SECRET_KEY_FALLBACKS", [])

ALLOWED_HOSTS = env_list(
    "ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", os.environ.get("HOST", "127.0.0.1")]
)
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# Behind HTTPS (README, "Production settings"). Every default suits `make run` on plain http.
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT")
# Load balancers probe /healthz over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE")
CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE")
SECURE_HSTS_SECONDS = int(os.environ.get("SECURE_HSTS_SECONDS") or 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD")
# Only behind a proxy that sets X-Forwarded-Proto itself: a client could claim https otherwise.
if env_bool("TRUST_X_FORWARDED_PROTO"):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
USE_X_FORWARDED_HOST = env_bool("USE_X_FORWARDED_HOST")

INSTALLED_APPS = [
    "daphne",
    # django.contrib.admin, its login throttled as /login/ is (config.admin).
    "config.apps.ParleyAdminConfig",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django.contrib.postgres",
    "django_htmx",
    "ninja",
    "channels",
    "chat",
    "questions",
    "api",
    "accounts",
    "webhooks",
    "reach",
    "mcp_server",
    "mcp_client",
    # Questions and approvals answered in Slack (slackbot/; docs/operators/slack.md).
    "slackbot",
    # The OAuth authorization server for /mcp/ (mcp_server/oauth.py).
    "oauth2_provider",
]

# WhiteNoise last: it is the one middleware that cannot run async, and Django's ASGI handler
# runs every middleware above a sync-only one in sync mode too, so the whole chain runs in one
# trip to the request's thread. Placed first, the chain below it ran async, and each of those
# middleware's hooks became a trip of its own between the event loop and the thread (an
# answer's request, measured on a 2-core machine with two tabs open: 40 ms against 24). Static
# files are still answered by it before any view; in production nginx serves them.
MIDDLEWARE = [
    "config.middleware.request_id_middleware",
    "django.middleware.security.SecurityMiddleware",
    "config.middleware.no_store_middleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.locale.LocaleMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "config.middleware.LoginRequiredExceptApiMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "config.middleware.ServiceUnavailableMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.template.context_processors.i18n",
                "django.template.context_processors.csp",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "accounts.context_processors.theme",
            ],
        },
    },
]

# Database: SQLite by default, tuned for concurrent writers; PostgreSQL via DATABASE_URL.
DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Each test process makes a test database of its own (runs may overlap on one server).
    DATABASES["default"]["TEST"] = {"NAME": f"test_parley_{os.getpid()}"}
    # A bounded pool per process (psycopg_pool) instead of one persistent connection per
    # thread: daphne's and the runtime's threads borrow a connection for each request or
    # step and give it back, so a process never holds more than DB_POOL_SIZE connections
    # whatever its thread count, and a burst waits for a free one instead of failing.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"]["OPTIONS"] = {
        "pool": {
            "min_size": 1,
            "max_size": int(os.environ.get("DB_POOL_SIZE", "8")),
            # How long a request waits for a free connection before failing.
            "timeout": float(os.environ.get("DB_POOL_TIMEOUT", "20")),
            # Connections idle this long are closed (down to min_size).
            "max_idle": 300,
            # Retries of a failed connection stop after this long, so their pauses (1, 2, 4 s,
            # doubling) stay short: the next request starts them again (config/database.py).
            "reconnect_timeout": database.RECONNECT_SECONDS,
            # Each connection handed out is checked, with a round trip unless it was in use
            # a moment ago (config/database.py).
            "check": database.check_unless_fresh,
        }
    }
else:
    # SQLite: persistent connections are safe (a file, no server-side limit; at most one per
    # thread of the process's bounded pools) and spare re-running the PRAGMAs per step.
    DATABASES["default"]["CONN_MAX_AGE"] = int(os.environ.get("CONN_MAX_AGE", "600"))
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    DATABASES["default"]["OPTIONS"] = {
        # IMMEDIATE takes the write lock at BEGIN, so two writers queue on the busy timeout
        # instead of failing with "database is locked" when a reader upgrades to a writer.
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
        "init_command": (
            "PRAGMA journal_mode=WAL;"
            "PRAGMA synchronous=NORMAL;"
            "PRAGMA foreign_keys=ON;"
            "PRAGMA busy_timeout=20000;"
        ),
    }
    # Tests use a file, not memory, so threads really contend for the lock as in production:
    # one of each test process's own, outside the source tree.
    DATABASES["default"]["TEST"] = {
        "NAME": str(Path(tempfile.gettempdir()) / f"parley-test-{os.getpid()}.sqlite3")
    }

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Channel layer: in-process by default; Redis when REDIS_URL is set (several processes).
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    # channels-redis waits for messages with a blocking BZPOPMIN that Redis answers after
    # RedisChannelLayer.brpop_timeout (5 s) even when nothing came, so the read timeout must be
    # longer than that: redis-py 8's 5 s default failed every idle receive (runworker exited,
    # websockets closed with 1011). 15 s still ends the wait on a Redis that stopped answering,
    # and connecting gives up after 5 s rather than the OS's minutes.
    redis_host = {"address": REDIS_URL, "socket_timeout": 15, "socket_connect_timeout": 5}
    if not REDIS_URL.startswith("unix:"):  # redis-py takes no keepalive for a Unix socket
        # Pooled connections no command is waiting on: probes after 30 s of silence find a
        # peer that vanished, and keep NAT and firewall entries from expiring.
        keepalive = {"TCP_KEEPIDLE": 30, "TCP_KEEPINTVL": 5, "TCP_KEEPCNT": 3}
        redis_host |= {
            "socket_keepalive": True,
            "socket_keepalive_options": {
                getattr(socket, name): value
                for name, value in keepalive.items()
                if hasattr(socket, name)  # not every platform lets these be tuned
            },
        }
    CHANNEL_LAYERS = {
        # The turns sent to the workers (chat.engine.dispatch): a queue in Redis, each taken
        # by one worker, kept for a worker that is restarting.
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_host], "capacity": 1000},
        },
        # The events of open pages and streams (core.events): hints that say "changed up
        # to N", which a page or stream that misses one catches up on by itself. Redis pub/sub
        # sends each in one PUBLISH, and a process gets its sockets' events over one
        # subscribed connection. Pub/sub channels are the whole Redis server's, whatever the
        # database selected: the prefix names REDIS_URL's database, which keeps sites that
        # share a Redis apart, as the queues above are.
        "events": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {
                "hosts": [redis_host],
                "prefix": f"asgi.db{parse_url(REDIS_URL).get('db', 0)}.",
            },
        },
    }
else:
    CHANNEL_LAYERS = {
        alias: {"BACKEND": "channels.layers.InMemoryChannelLayer", "CONFIG": {"capacity": 1000}}
        for alias in ("default", "events")
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    # Reads the user of sessions signed in by the previous release (accounts/backends.py).
    "accounts.backends.CompiledModelBackend",
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en"
LANGUAGES = [
    ("en", _("English")),
    ("zh-hans", _("Simplified Chinese")),
    ("pt-br", _("Brazilian Portuguese")),
]
LOCALE_PATHS = [BASE_DIR / "locale"]
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only for deployments that run collectstatic; `make run` serves from the finders.
STATIC_ROOT = os.environ.get("STATIC_ROOT") or None
if STATIC_ROOT and not DEBUG:
    # Collected files get content-hashed names (cached for good by browsers: WhiteNoise sends
    # `immutable`) and gzip copies; pages refer to the hashed names.
    STORAGES = {
        "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
        "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    }
    WHITENOISE_USE_FINDERS = False
else:
    # Serve straight from the finders: no collectstatic step for `make run`.
    WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = DEBUG

# Sessions in the database (Django's default engine): every request and every open socket's
# re-check reads one, by its primary key. Not through the cache (cached_db): Django keeps a
# cache client for each async context, so every open websocket held a Redis connection of its
# own for its whole life (150 idle sockets: 150 connections, ~20 KB more each).
SESSION_ENGINE = "django.contrib.sessions.backends.db"
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
    "base-uri": [CSP.NONE],
    "object-src": [CSP.NONE],
}

# A form post larger than this is refused before it is parsed (HTTP 400), not read into memory.
DATA_UPLOAD_MAX_MEMORY_SIZE = 256 * 1024

# `text` for people, `json` (one object per line) for log collectors; both carry the request id.
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text").strip().lower()
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}.")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "config.logging.RequestIdFilter"}},
    "formatters": {
        "text": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {"()": "config.logging.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id"],
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "parley": {"level": os.environ.get("LOG_LEVEL", "INFO")},
        # Django's own handlers would write its lines a second time, unformatted, under DEBUG.
        "django": {"handlers": []},
    },
}

# Counters for the limits below (core.limits): shared through Redis when there is one.
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": "parley",
            "OPTIONS": {"socket_timeout": 5, "socket_connect_timeout": 5},
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# --- Parley ---------------------------------------------------------------------------------

# The longest message a user may send, in characters (documented in the README).
PARLEY_MAX_MESSAGE_CHARS = 20_000
# The agent provider and model (the scripted agent needs neither network nor key).
AGENT_PROVIDER = os.environ.get("AGENT_PROVIDER", "scripted")
AGENT_MODEL = os.environ.get("AGENT_MODEL", "")
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "")
OPENAI_API_KEY = os.environ.get("OPENAI_API_KEY", "")
ANTHROPIC_BASE_URL = os.environ.get("ANTHROPIC_BASE_URL", "")
ANTHROPIC_API_KEY = os.environ.get("ANTHROPIC_API_KEY", "")
# Model requests allowed in one turn before the agent is stopped.
AGENT_MAX_STEPS = int(os.environ.get("AGENT_MAX_STEPS", "10"))
# The model's context window, in tokens: the history of each request fits in it by a
# conservative estimate, its oldest turns left out first (chat.engine.window). Unset: the
# window the provider's endpoint reports for the model, else 100,000.
AGENT_CONTEXT_TOKENS = int(os.environ.get("AGENT_CONTEXT_TOKENS") or 0) or None
# Whether what is left out is replaced by the model's summary of it, written once and kept.
AGENT_SUMMARIZE = env_bool("AGENT_SUMMARIZE")
# Seconds one provider request may take; failed requests are retried this many times.
AGENT_REQUEST_TIMEOUT = float(os.environ.get("AGENT_REQUEST_TIMEOUT", "120"))
AGENT_RETRIES = int(os.environ.get("AGENT_RETRIES", "3"))
# The scripted agent: its script (TOML) and the seconds between its streamed words.
SCRIPTED_AGENT_SCRIPT = os.environ.get("SCRIPTED_AGENT_SCRIPT", "")
SCRIPTED_AGENT_DELAY = float(os.environ.get("SCRIPTED_AGENT_DELAY", "0.04"))
# A runner's lease on a turn lasts this long unless renewed (its heartbeat renews it every
# third of that); every process sweeps for turns whose lease has lapsed this often. So a
# runner killed with -9 is replaced within lease + sweep (8 s); one stopped with SIGTERM gives
# its leases back at once and is replaced within a sweep.
PARLEY_LEASE_SECONDS = float(os.environ.get("PARLEY_LEASE_SECONDS", "6"))
PARLEY_SWEEP_SECONDS = float(os.environ.get("PARLEY_SWEEP_SECONDS", "2"))
# The question tools offered to the model (empty: the agent cannot ask), how question calls
# may share a turn with other tool calls, and how many questions one turn may ask.
QUESTION_TOOLS = env_list("QUESTION_TOOLS", ["question", "ask_user_question", "confirm_action"])
QUESTION_CALL_POLICY = os.environ.get("QUESTION_CALL_POLICY", "standalone")
QUESTION_MAX_PER_TURN = int(os.environ.get("QUESTION_MAX_PER_TURN", "3"))
# Seconds a question stays open before the server resolves it as expired (unset or 0: never;
# each user may set their own in Settings, 0 there meaning never), and how many seconds before
# that a reminder goes out (unset: at 80% of the time; 0: no reminder).
QUESTION_EXPIRE_AFTER = int(os.environ.get("QUESTION_EXPIRE_AFTER") or 0) or None
# Seconds after which a question assigned to someone other than the conversation's owner, still
# unanswered, goes back to the owner (who is notified). Unset or 0: never.
QUESTION_ESCALATE_AFTER = int(os.environ.get("QUESTION_ESCALATE_AFTER") or 0) or None
QUESTION_REMIND_BEFORE = (
    float(os.environ["QUESTION_REMIND_BEFORE"])
    if os.environ.get("QUESTION_REMIND_BEFORE")
    else None
)
# Tools from MCP servers (mcp_client/): a JSON file in the `mcpServers` format (docs/operators/
# tools.md). Unset: no MCP servers.
MCP_CONFIG = os.environ.get("MCP_CONFIG", "")
# Parley as an MCP server (mcp_server/): a call that waits for the user's answer sends the
# client a progress notification this often, in seconds (the contract: at least every 15 s).
MCP_PROGRESS_SECONDS = float(os.environ.get("MCP_PROGRESS_SECONDS", "10"))
# An MCP session with no request in flight for this many seconds ends (a call that waits for
# the user keeps its session open however long the wait).
MCP_SESSION_IDLE_SECONDS = float(os.environ.get("MCP_SESSION_IDLE_SECONDS", "600"))
# The MCP sessions one user may hold open in one web process; past it, opening another is
# refused (429) until one is closed or ends idle.
MCP_SESSIONS_PER_USER = int(os.environ.get("MCP_SESSIONS_PER_USER", "20"))
# Every MCP tool call a user makes, whatever it asks, counts against this (429 past it).
PARLEY_MCP_CALLS_PER_MINUTE = int(os.environ.get("PARLEY_MCP_CALLS_PER_MINUTE", "60"))
# The agent CLIs' permission hooks (/hooks/…): how long a request waits for the person's
# decision, in seconds, before it answers with none (the CLI then asks in its own terminal).
# A little under the 600 s hook timeout the Settings page's snippets set.
AGENT_HOOK_WAIT = float(os.environ.get("AGENT_HOOK_WAIT", "590"))
# Parley's own address as people reach it, for links sent elsewhere (webhooks); the Settings
# page's "Connect an agent" uses it when it is set, else the address the page was opened at.
PUBLIC_URL_CONFIGURED = bool(os.environ.get("PUBLIC_URL"))
PUBLIC_URL = (
    os.environ.get("PUBLIC_URL")
    or f"http://{os.environ.get('HOST') or '127.0.0.1'}:{os.environ.get('PORT') or '8000'}"
).rstrip("/")
# Parley as the OAuth 2.1 authorization server of its own /mcp/ (django-oauth-toolkit; see
# mcp_server/oauth.py and docs/operators/configuration.md): authorization code with PKCE (S256
# only), open dynamic registration and client metadata documents (public clients, as MCP's
# hosted clients are), tokens bound to /mcp/ (RFC 8707), refresh tokens rotated once used.
# The issuer is PUBLIC_URL when set, else the address each request came to.
# `http` redirects stay allowed for native apps' loopback callbacks (RFC 8252), which MCP
# clients on a desktop use; mcp_server.oauth.ParleyValidator refuses any other http redirect.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]
OAUTH2_PROVIDER = {
    "OAUTH2_VALIDATOR_CLASS": "mcp_server.oauth.ParleyValidator",
    "SCOPES": {"mcp": "Ask you questions and ask for your approval"},
    "DEFAULT_SCOPES": ["mcp"],
    "PKCE_REQUIRED": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": int(os.environ.get("OAUTH_ACCESS_TOKEN_SECONDS", "3600")),
    "REFRESH_TOKEN_EXPIRE_SECONDS": int(
        os.environ.get("OAUTH_REFRESH_TOKEN_SECONDS", str(90 * 24 * 3600))
    ),
    # Loopback redirects of desktop clients may use any port (RFC 8252 §7.3).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic"],
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "OIDC_ISS_ENDPOINT": PUBLIC_URL if PUBLIC_URL_CONFIGURED else "",
    "OAUTH2_PROTECTED_RESOURCE_NAME": "Parley",
}
# Webhooks (webhooks/): URLs that resolve to loopback, private, link-local or reserved
# addresses are refused unless this is true (a receiver on the same network); a delivery is
# tried this many times, with exponential backoff from WEBHOOK_RETRY_SECONDS, each attempt
# given WEBHOOK_TIMEOUT seconds.
WEBHOOK_ALLOW_PRIVATE_NETWORKS = env_bool("WEBHOOK_ALLOW_PRIVATE_NETWORKS")
WEBHOOK_MAX_ATTEMPTS = int(os.environ.get("WEBHOOK_MAX_ATTEMPTS", "8"))
WEBHOOK_RETRY_SECONDS = float(os.environ.get("WEBHOOK_RETRY_SECONDS", "10"))
WEBHOOK_TIMEOUT = float(os.environ.get("WEBHOOK_TIMEOUT", "5"))
# Attempts a process makes at once, and at most this many of them for one user's webhooks.
WEBHOOK_CONCURRENCY = int(os.environ.get("WEBHOOK_CONCURRENCY", "10"))
WEBHOOK_USER_SHARE = int(os.environ.get("WEBHOOK_USER_SHARE", "2"))
# A round of deliveries waits this long at most for its attempts; slower ones go on, and a
# later round records them.
WEBHOOK_ROUND_SECONDS = float(os.environ.get("WEBHOOK_ROUND_SECONDS", "1"))
# Mail (reach/mail.py: questions e-mailed to the users who ask for them in Settings): Django's
# mail settings, read from the environment under their classic names and given to Django 6.1's
# MAILERS (the default mailer). Unset EMAIL_BACKEND: SMTP, to EMAIL_HOST (localhost) on
# EMAIL_PORT (25); `django.core.mail.backends.filebased.EmailBackend` writes each message to a
# file in EMAIL_FILE_PATH instead.
EMAIL_BACKEND_PATH = (
    os.environ.get("EMAIL_BACKEND") or "django.core.mail.backends.smtp.EmailBackend"
)
if EMAIL_BACKEND_PATH.endswith(".smtp.EmailBackend"):
    email_options = {
        "host": os.environ.get("EMAIL_HOST") or "localhost",
        "port": int(os.environ.get("EMAIL_PORT") or 25),
        "username": os.environ.get("EMAIL_HOST_USER", ""),
        "password": os.environ.get("EMAIL_HOST_PASSWORD", ""),
        "use_tls": env_bool("EMAIL_USE_TLS"),
        "use_ssl": env_bool("EMAIL_USE_SSL"),
        "timeout": float(os.environ.get("EMAIL_TIMEOUT") or 10),
    }
elif EMAIL_BACKEND_PATH.endswith(".filebased.EmailBackend"):
    email_options = {"file_path": os.environ.get("EMAIL_FILE_PATH") or str(BASE_DIR / "data/mail")}
else:
    email_options = {}
MAILERS = {"default": {"BACKEND": EMAIL_BACKEND_PATH, "OPTIONS": email_options}}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL") or "Parley <parley@localhost>"
# Web Push (reach/push.py): the VAPID key pair (`manage.py vapid_keys` makes one) and the
# contact a push service may write to (a mailto: or https: URL). Unset keys: no Web Push.
VAPID_PUBLIC_KEY = os.environ.get("VAPID_PUBLIC_KEY", "")
VAPID_PRIVATE_KEY = os.environ.get("VAPID_PRIVATE_KEY", "")
VAPID_SUBJECT = os.environ.get("VAPID_SUBJECT", "mailto:parley@localhost")
# The push services a browser's subscription may name, as the server sends to them (a comma-
# separated list of host names; `*.example.com` for any name under it, `*` for any host):
# Chrome's (and Chromium's), Firefox's, Edge's and Safari's. Pushes go over https only, to
# public addresses unless WEBHOOK_ALLOW_PRIVATE_NETWORKS.
PUSH_SERVICE_HOSTS = env_list(
    "PUSH_SERVICE_HOSTS",
    [
        "fcm.googleapis.com",
        "updates.push.services.mozilla.com",
        "*.notify.windows.com",
        "web.push.apple.com",
    ],
)
# Slack (slackbot/, docs/operators/slack.md): the app's bot token (xoxb-…) and signing secret,
# its app-level token (xapp-…) for Socket Mode (`manage.py slack_socket`), and the Web API's
# base URL (tests point it at a fake). No bot token: nothing is sent to Slack.
SLACK_BOT_TOKEN = os.environ.get("SLACK_BOT_TOKEN", "")
SLACK_SIGNING_SECRET = os.environ.get("SLACK_SIGNING_SECRET", "")
SLACK_APP_TOKEN = os.environ.get("SLACK_APP_TOKEN", "")
SLACK_API_URL = os.environ.get("SLACK_API_URL", "https://slack.com/api/")
# The channel that `manage.py worker` serves when REDIS_URL is set.
PARLEY_RUN_CHANNEL = "parley-runs"
# Seconds a worker keeps trying to reach a Redis it lost before it exits, for its supervisor
# to restart it (chat/management/commands/worker.py).
PARLEY_WORKER_RIDE_OUT_SECONDS = float(os.environ.get("PARLEY_WORKER_RIDE_OUT_SECONDS", "30"))
# Limits per user (0: no limit): turns running at once, messages and new conversations per
# minute, open event streams; failed logins per account and per client address before a
# lockout of PARLEY_LOGIN_LOCKOUT_SECONDS.
PARLEY_MAX_RUNNING_TURNS = int(os.environ.get("PARLEY_MAX_RUNNING_TURNS", "3"))
# Sub-agents one user's agents may have running at once (their own cap, beside the turns
# above): at most PARLEY_MAX_RUNNING_TURNS + PARLEY_MAX_RUNNING_SUBAGENTS turns run per user.
PARLEY_MAX_RUNNING_SUBAGENTS = int(os.environ.get("PARLEY_MAX_RUNNING_SUBAGENTS", "4"))
PARLEY_MESSAGES_PER_MINUTE = int(os.environ.get("PARLEY_MESSAGES_PER_MINUTE", "30"))
PARLEY_CONVERSATIONS_PER_MINUTE = int(os.environ.get("PARLEY_CONVERSATIONS_PER_MINUTE", "20"))
PARLEY_MAX_STREAMS = int(os.environ.get("PARLEY_MAX_STREAMS", "10"))
# Seconds an event stream with nothing to send waits before it sends a keepalive comment:
# less than the read timeout of any proxy in front of Parley.
PARLEY_STREAM_KEEPALIVE_SECONDS = float(os.environ.get("PARLEY_STREAM_KEEPALIVE_SECONDS", "15"))
# Searches of the transcripts one user may make per minute, and how long one may take on
# PostgreSQL before it is cancelled (seconds; 0: no limit).
PARLEY_SEARCHES_PER_MINUTE = int(os.environ.get("PARLEY_SEARCHES_PER_MINUTE", "60"))
PARLEY_SEARCH_TIMEOUT = float(os.environ.get("PARLEY_SEARCH_TIMEOUT", "3"))
# Seconds a deleted conversation can still be restored (Undo) before the sweep removes it.
PARLEY_DELETE_UNDO_SECONDS = float(os.environ.get("PARLEY_DELETE_UNDO_SECONDS", "60"))
# Websockets one user may hold open on one web process (each page has two): what a push
# costs a process grows with its sockets, so one user cannot slow everyone else's.
PARLEY_MAX_SOCKETS = int(os.environ.get("PARLEY_MAX_SOCKETS", "40"))
PARLEY_LOGIN_FAILURES_PER_ACCOUNT = int(os.environ.get("PARLEY_LOGIN_FAILURES_PER_ACCOUNT", "10"))
PARLEY_LOGIN_FAILURES_PER_ADDRESS = int(os.environ.get("PARLEY_LOGIN_FAILURES_PER_ADDRESS", "30"))
PARLEY_LOGIN_LOCKOUT_SECONDS = int(os.environ.get("PARLEY_LOGIN_LOCKOUT_SECONDS", "900"))
