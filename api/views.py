"""The API tokens settings page: create (the token is shown once), list and revoke."""

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from api.models import ApiToken
from api.tokens import create_token, revoke_token


@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    new_token = ""
    if request.method == "POST":
        _, new_token = create_token(user=request.user, name=request.POST.get("name", ""))
    context = {
        "tokens": ApiToken.objects.filter(user=request.user),
        "new_token": new_token,
        "api_base": request.build_absolute_uri("/api/v1/"),
    }
    return render(request, "api/tokens.html", context, status=201 if new_token else 200)


@require_POST
def revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    revoke_token(user=request.user, token_id=token_id)
    return redirect("api_tokens")
